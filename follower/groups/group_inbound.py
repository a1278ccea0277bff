"""Group rooms from the receiving side: a control message changes the book, a group message
is opened in its sender's Megolm session, and a "no group key" receipt marks a member lacking
and says which block to send that member again (`block_to_resend`).

Each runs after the pairwise message was opened and passed the gate, so the sender is an
authenticated contact and every field of the group block has its shape. What is refused here
is refused for a reason the inbox quarantines the message with and tells its sender
(`GroupRefused`): an update not from the group's owner or not newer, a leave from a non-member,
a group message for a group unknown or not active here, from a sender not a member in this
side's view, in a session another member shared, with words another member wrote (its key and
message passed on: `keys.groups.text`), or in a session this side holds no key for (the
reason then starts with `keys.groups.sessions.NO_GROUP_KEY`: the sender's next copy carries
the key, and the refused one is sent again once, with the key from that message on).

Crash reasoning: the book and the session file are each replaced whole before the message is
handed on and acked. A control message taken again after a kill is refused as not newer (or
finds the leaver gone), which quarantines a harmless copy; a group message taken again finds
its key imported already and decrypts the same.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from durable.errors import GroupRefused
from keys.contacts import Contact
from keys.envelope import Inner
from keys.groups.book import GroupBook, GroupState, apply_leave, apply_update
from keys.groups.sessions import NO_GROUP_KEY, GroupKeys, message_index

__all__ = ["block_to_resend", "lacking_key", "open_group_message", "take_control"]

# The reason `GroupKeys.decrypt` gives, read back from a peer's receipt.
LACKING = re.compile(rf"{NO_GROUP_KEY}: session ([A-Za-z0-9+/]{{43}}) of group ([0-9a-f]{{32}})")


def take_control(folder: Path, me: str, contact: Contact, inner: Inner, sessions: GroupKeys) -> str:
    """Apply a control message from `contact` to the book; a note saying what changed.

    Raises:
        GroupRefused: the rule refuses it (`keys.groups.book`).
    """
    block = inner.extra["group"]
    with GroupBook(folder).changing() as groups:
        if block["op"] == "update":
            group = apply_update(groups, contact.fingerprint, me, block)
        else:
            group = apply_leave(groups, contact.fingerprint, block["id"])
        groups[group.id] = group
    sessions.rotate(group.id)  # any change of members: our next message starts a new session
    if block["op"] == "leave":
        return f"{contact.name} left group {group.name}" + (
            " (its owner: the group is closed)" if group.state is GroupState.CLOSED else "")
    if group.state is GroupState.REMOVED:
        return f"{contact.name} removed you from group {group.name}"
    return f"group {group.name} (owner {contact.name}) now has {len(group.members)} members"


def open_group_message(folder: Path, contact: Contact, inner: Inner,
                       sessions: GroupKeys) -> tuple[Inner, dict[str, Any]]:
    """`inner` with the group message's text in place of its empty one, and the fields its
    spool line gets ("group": this side's name for it, "group_id", "gm", "by").

    Raises:
        GroupRefused: as the module says.
    """
    block = inner.extra["group"]
    group = GroupBook(folder).all().get(block["id"])
    if group is None or group.state is not GroupState.ACTIVE:
        raise GroupRefused(f"a group message from {contact.name} for a group that is unknown or not "
                           "active here")
    if contact.fingerprint not in group.members:
        raise GroupRefused(f"a group message for {group.name} from {contact.name}, who is not a member "
                           "of it here")
    said = sessions.decrypt(group.id, contact.fingerprint, block["session"], block["body"],
                            block.get("key"), block.get("export"))
    if said.gm != block["gm"]:
        raise GroupRefused(f"a group message from {contact.name} names another gm inside than outside")
    fields = {"group": group.name, "group_id": group.id, "gm": block["gm"], "by": block["by"]}
    return inner._replace(text=said.text), fields


def lacking_key(folder: Path, sessions: GroupKeys, contact: Contact, reason: str) -> None:
    """A member's refusal of a copy for want of our session key: its next copy carries it.
    The reason is the member's word, so it can only take that member off the key's holders."""
    found = LACKING.match(reason)
    if found is None:
        return
    session_id, group_id = found.groups()
    group = GroupBook(folder).all().get(group_id)
    if group is not None and contact.fingerprint in group.members:
        sessions.lacking(group_id, session_id, contact.fingerprint)


def block_to_resend(sessions: GroupKeys, refused: Inner | None, reason: str) -> dict[str, Any] | None:
    """The group block to send a member again in a new copy, after it refused our copy `refused`
    with `reason` for want of our session's key: the same block with the key exported from that
    message on in place of any "key". None when there is nothing to send again: not a group
    message, one sent again already (it carries "export": once is enough), a reason naming
    another session, or a session whose key is no longer kept here.

    The reason is the member's word, but `refused` is our own copy addressed to that member, so
    the most it can win is a message it was sent, and the key from there on in that session.
    """
    block = None if refused is None or refused.kind != "chat" else refused.extra.get("group")
    found = LACKING.match(reason)
    if block is None or "op" in block or "export" in block or found is None:
        return None
    if found.groups() != (block["session"], block["id"]):
        return None
    index = message_index(block["body"])
    export = None if index is None else sessions.key_at(block["id"], block["session"], index)
    if export is None:
        return None
    return {**{k: v for k, v in block.items() if k != "key"}, "export": export}
