"""The spool line an agent sees for one message taken: the receiver's own judgement of what it is.

Fields that steer framing (kind, task_trust, retry) are set here from what this side decided,
never copied from the sender's envelope; `spool_writer.record.SpoolRecord` is the line's type.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from durable.mesh_fields import may_carry_block

if TYPE_CHECKING:
    from follower.policy import Rule
    from follower.tasks import mesh
    from keys.contacts import Contact
    from keys.envelope import Inner


def task_block(inner: Inner) -> mesh.Parsed | None:
    """The opencode-mesh block a chat message carries (task, result, question, digest), if any."""
    if inner.kind != "chat" or not may_carry_block(inner.text):
        return None
    from follower.tasks import mesh

    parsed = mesh.parse(inner.text)
    return None if parsed.kind == "chat" else parsed


def spool_line(contact: Contact, inner: Inner, rule: Rule, hops: list[str], block: mesh.Parsed | None,
               retry: bool) -> dict[str, Any]:
    """The line an agent will see. Fields that steer framing (kind, task_trust, retry) are the
    receiver's own judgement, never copied from the sender's envelope."""
    record: dict[str, Any] = {"id": inner.id, "from": inner.sender, "name": contact.name,
                              "text": inner.text, "ts": inner.ts, "kind": inner.kind}
    if hops:
        record["hops"] = hops
    if block is None:
        return record
    record.update(block.fields)
    record["kind"] = block.kind
    if block.kind == "task":
        record["retry"] = retry
        record["task_trust"] = rule.tasks
    return record
