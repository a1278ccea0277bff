"""SpoolRecord: one received message as one spool line, for the writer and every reader.

The follower builds it (`follower.receive.spool_line`), `Spool.deliver` checks it and adds `received`,
and the doors and the CLI read it back with a `CursorReader`. The type is what a writer puts
there, not what a reader is sure to find: a line read back is data from a file, and
`cursor.message_of` checks only that it is a JSON object with a string id. So every field that
steers anything (how a message is framed, whether a task counts as one, a value shown outside
the quote) is checked again where it is used, as `alarms.framing` does.

A task envelope's other headers ride along as `mesh_<header>` (`follower.tasks.mesh`): they are open-ended,
so they are not declared here, and a reader that wants one reads it as untyped data.
"""

from __future__ import annotations

from typing import Required, TypedDict

__all__ = ["REQUIRED", "SpoolRecord", "fault"]

# Functional form: "from" is a keyword, so it cannot be a class attribute.
SpoolRecord = TypedDict("SpoolRecord", {
    # The message, from the opened envelope (follower.receive.inbound).
    "id": Required[str],  # follower: the envelope's id (a join request's, on a note); the dedup key
    "from": Required[str],  # follower: the sender's fingerprint, as pinned in the contact book
    "name": Required[str],  # follower: the receiver's contact name for the sender
    "text": Required[str],  # follower: the sender's words, as the gate passed them; shown only quoted
    "ts": Required[str],  # follower: when the sender says it sent it (ISO 8601); a note's own time
    # follower: "chat", "contact_accepted", or the mesh kind follower.tasks.mesh read in chat
    "kind": Required[str],
    # Added on delivery.
    "received": str,  # spool_writer (Spool.deliver): when the line was written, UTC ISO 8601; for
    # held mail, when it was held (it arrived then)
    "released": str,  # follower (Account.release): when held mail was let through, UTC ISO 8601
    # The receiver's own findings, never copied from the envelope (follower).
    "hops": list[str],  # follower: fingerprints it was forwarded through, oldest first; absent if direct
    # follower (follower.receive.sequence): earlier messages from this sender it showed to be missing
    "gap": int,
    "late": bool,  # follower (follower.receive.sequence): it came after later ones from the same sender
    "retry": bool,  # follower, on a task: this sender sent this task id before (follower.tasks.ledger)
    "task_trust": bool,  # follower, on a task: the receiver's policy trusts the sender for tasks
    # A group message (follower.groups.group_inbound): the text is the group message's, opened.
    "group": str,  # follower: the receiver's own name for the group
    "group_id": str,  # follower: the group's id (32 hex)
    "gm": str,  # follower: the group message's id, the same in every member's copy
    "by": str,  # follower: "person" or "agent", as the sender says who wrote it
    # What follower.tasks.mesh parsed from the text (follower); which ones depend on `kind`.
    "task": str,  # every mesh kind: the task id (durable.mesh_fields.TASK_ID)
    "mode": str,  # task: how to run it, one of durable.mesh_fields.MODES
    "reply": str,  # task: the answer the sender asks for ("result-block")
    "env": str,  # task: the environment the sender names for it
    "status": str,  # result: one of durable.mesh_fields.STATUSES
    "summary": str,  # result: what was done, possibly several lines
    "artifacts": list[str],  # result: the paths it produced
    "question": str,  # question: one line
    "options": list[str],  # question: the answers offered, perhaps none
    "gen": int,  # digest: its generation
    "facts": list[str],  # digest: one fact each
    "pending": str | None,  # digest: what is still open, None for nothing
    "refs": list[str],  # digest: what it refers to
    # follower (follower.files.taker): the files it came with, each {"path": where talk saved it,
    # "name": that file's name, "size": bytes, "sha256": hex}; handed on once all are in
    "files": list[dict[str, object]],
}, total=False)

# The fields every record has, in the order a missing-field error names them; a test keeps
# this equal to SpoolRecord.__required_keys__.
REQUIRED = ("id", "from", "name", "text", "ts", "kind")


def fault(obj: object) -> str | None:
    """What keeps `obj` (a line read back) from being a whole record to show, or None.

    The fields every record has must be strings, and so must `received` where present; the
    optional ones are left to the reader that uses them.
    """
    if not isinstance(obj, dict):
        return "not a JSON object"
    missing = [k for k in REQUIRED if k not in obj]
    if missing:
        return f"lacks {', '.join(missing)}"
    wrong = [k for k in (*REQUIRED, "received") if k in obj and not isinstance(obj[k], str)]
    if wrong:
        return f"{', '.join(wrong)} not text"
    return None
