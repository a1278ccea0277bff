"""Group rooms from the sending side: make and change a group, leave it, write to it.

A group is nothing the relay sees. Each message to it is encrypted once in this identity's
Megolm session for the group (`keys.groups.sessions`), then sent to every other member as an
ordinary pairwise message (`follower.send.outbound.send`: its own id, number, outbox entry and
receipts; in the pair's Olm session when there is one; sealed, padded, under the pair's tag),
of kind "chat" with an empty text and a group block:

    {"group": {"id", "name", "gm", "session", "body", "key"? or "export"?, "by"}}

`gm` names the group message (the same in every copy), `body` is the Megolm message (whose words,
`keys.groups.text`, name the group, the gm and this identity as their writer), `key` the
session key, only in the copies to members that lack it, and `by` says whether a person or an
agent wrote it. `export` replaces `key` in a copy sent again, in a new message, to a member that
refused one for want of the key (`follower.receive.inbound`, `follower.groups.group_inbound.block_to_resend`):
the session's key from that message on. Membership travels the same way, as messages of kind
"group" from the owner (`{"op": "update", "id", "name", "owner", "members", "version"}`) or from
a member leaving (`{"op": "leave", "id"}`); the receiving side is `follower.groups.group_inbound`.

Order, for a crash: the book is changed first, then the session rotated, then the control
messages sent through the outbox, which keeps each one until the relay has it. A kill between
the change and the sending leaves members uninformed until the owner's next change.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from durable.errors import NotFound, RelayError, UserError
from durable.message_ids import resolve
from follower.send import outbound
from keys.groups.book import Group, GroupBook, GroupState
from keys.groups.sessions import GroupKeys
from keys.groups.text import GroupText
from keys.ratchet.account import RatchetAccount

if TYPE_CHECKING:
    from follower.relay.client import RelayClient
    from follower.send.outbox import Outbox
    from keys.contacts import Contact, ContactBook
    from keys.identity import Identity

__all__ = ["Changed", "Copy", "GroupMail", "GroupSent", "Resumed", "group_status", "send_copy"]

NOT_A_CONTACT = "not a contact"


class Copy(NamedTuple):
    """One member's copy of a group message: its own message id and how far it got."""

    member: str
    name: str
    id: str | None
    state: str
    warning: str | None = None


class Changed(NamedTuple):
    """A group as this identity changed it, and how telling each member went."""

    group: Group
    told: list[Copy]


class Resumed(NamedTuple):
    """What a person's resume of a group lifted: the members (fingerprints) and their kept mail."""

    group: Group
    members: list[str]
    released: list[str]


class GroupSent(NamedTuple):
    gm: str
    group: str
    copies: list[Copy]
    held: str | None = None  # this message brought us to the loop guard's cap: the notice

    def report(self) -> dict[str, Any]:
        """What `talk send @NAME --json` prints."""
        return {"gm": self.gm, "group": self.group, "to": f"@{self.group}",
                "members": [{"name": c.name, "fingerprint": c.member, "id": c.id, "state": c.state}
                            for c in self.copies],
                **({"held": self.held} if self.held else {})}


def group_status(outbox: Outbox, typed: str) -> dict[str, Any] | None:
    """Each member's copy of a sent group message and how far it got (what `talk status GM`
    and the MCP tool answer), named by its gm or an unambiguous prefix of one, as lists show
    ids (`durable.message_ids`); None if it names no group message, so the caller looks for a
    message of that id.

    Raises:
        UserError: the prefix begins several messages (group messages or copies).
    """
    entries = outbox.entries()
    copies = [e for e in entries.values() if e.extra.get("gm") == typed]
    if not copies:
        prefix = typed.strip().lower()
        everything = outbox.everything()
        gms = {str(e.extra["gm"]) for e in everything.values() if isinstance(e.extra.get("gm"), str)}
        if not prefix or not any(g.startswith(prefix) for g in gms):
            return None
        gm = resolve(prefix, [*gms, *everything], "sent message", "`talk outbox` lists them")
        copies = [e for e in everything.values() if e.extra.get("gm") == gm]
        if not copies:
            return None  # the prefix named one copy's own id: the caller shows that message
    gm = str(copies[0].extra["gm"])
    return {"gm": gm, "group": copies[0].extra.get("group"), "members": [e.public() for e in copies]}


class GroupMail:
    """The groups of one identity, from the sending side: built from the parts it uses (its
    folder, names, contacts, relay client and outbox) and `identity`, which unlocks the private
    keys only when a message is encrypted."""

    def __init__(self, folder: Path, name: str, fingerprint: str, contacts: ContactBook,
                 client: RelayClient, outbox: Outbox, identity: Callable[[], Identity]) -> None:
        self.folder = folder
        self.name = name
        self.me = fingerprint
        self.contacts = contacts
        self.client = client
        self.outbox = outbox
        self.identity = identity
        self.book = GroupBook(folder)

    def _contacts(self, names: list[str]) -> list[Contact]:
        """The contacts `names` name, each checked to be one.

        Raises:
            NotFound: one of them is no contact (named in the message).
        """
        found = []
        for name in names:
            try:
                found.append(self.contacts.get(name))
            except NotFound:
                raise NotFound(f"{name!r} is not a contact, so it cannot be in a group; exchange an invite "
                               "first (`talk invite`, then they run `talk join`)") from None
        return found

    def _owned(self, name: str) -> Group:
        group = self.book.get(name)
        if group.owner != self.me:
            raise UserError(f"only the owner of {group.name} changes its members; ask them")
        if group.state is not GroupState.ACTIVE:
            raise UserError(f"group {group.name} is {group.state.value}; nothing can change in it")
        return group

    def create(self, name: str, members: list[str]) -> Changed:
        """A new group owned by this identity with `members` (contacts), who are told.

        Raises:
            NotFound: a member is no contact.
            UserError: the name is malformed or taken here, or there are no other members.
        """
        chosen = self._contacts(members)
        if not [c for c in chosen if c.fingerprint != self.me]:
            raise UserError("a group needs at least one member besides you: add --member NAME")
        group = self.book.create(name, self.me, [c.fingerprint for c in chosen])
        return Changed(group, self._announce(group, group.others(self.me)))

    def add(self, name: str, member: str) -> Changed:
        group = self._owned(name)
        added = self._contacts([member])[0].fingerprint
        if added in group.members:
            raise UserError(f"{member} is already a member of {group.name}")
        return self._change(group, (*group.members, added), [])

    def remove(self, name: str, member: str) -> Changed:
        group = self._owned(name)
        contact = self._contacts([member])[0]
        if contact.fingerprint not in group.members or contact.fingerprint == self.me:
            raise UserError(f"{member} is not a member of {group.name} you can remove")
        gone = contact.fingerprint
        return self._change(group, tuple(m for m in group.members if m != gone), [gone])

    def _change(self, group: Group, members: tuple[str, ...], removed: list[str]) -> Changed:
        """Record the new members, rotate our session (a removed member never gets a later key)
        and tell every member, and the removed ones, the new list."""
        changed = group._replace(members=members, version=group.version + 1)
        self.book.put(changed)
        self.sessions.rotate(group.id)
        return Changed(changed, self._announce(changed, [*changed.others(self.me), *removed]))

    def leave(self, name: str) -> Changed:
        """Leave group `name`: the other members are told and drop us; an owner leaving closes it."""
        group = self.book.get(name)
        if group.state is not GroupState.ACTIVE:
            raise UserError(f"group {group.name} is {group.state.value} already")
        left = group._replace(state=GroupState.LEFT)
        self.book.put(left)
        self.sessions.rotate(group.id)
        from follower.groups.loop_guard import LoopGuard

        LoopGuard(self.folder).forget(group.id)
        return Changed(left, self._control(group.others(self.me), {"op": "leave", "id": group.id}))

    def resume(self, name: str, member: str | None = None) -> Resumed:
        """Lift the loop guard's hold on `member` of group `name` (None: on each held member; a
        person's act): the members it lifted and the ids of the mail the guard kept aside from
        them (None: all it kept in the group, an older talk's whole-group hold too), for the
        caller to release into the spool. Nothing held: nothing lifted, nothing released.

        Raises:
            NotFound: no such group, or `member` is no contact.
            UserError: `member` is not a member of the group.
        """
        from follower.groups.loop_guard import LoopGuard, kept_aside
        from follower.held import HeldBox

        group = self.book.get(name)
        chosen = None
        if member is not None:
            chosen = self.me if member == self.name else self._contacts([member])[0].fingerprint
            if chosen not in group.members:
                raise UserError(f"{member} is not a member of {group.name}; `talk group list` shows them")
        lifted = LoopGuard(self.folder).resume(group.id, chosen)
        return Resumed(group, lifted, kept_aside(HeldBox(self.folder).all(), group.id, chosen))

    def _announce(self, group: Group, to: list[str]) -> list[Copy]:
        return self._control(to, {"op": "update", "id": group.id, "name": group.name, "owner": group.owner,
                           "members": list(group.members), "version": group.version})

    def _control(self, to: list[str], block: dict[str, Any]) -> list[Copy]:
        outbound.send_queued(self.client, self.outbox)  # what waits goes first
        return [self._copy(member, "group", {"group": block}, (f"(group {block['op']})", {}))
                for member in to]

    def send(self, name: str, text: str, by: str) -> GroupSent:
        """`text` to every other member of group `name`, encrypted once, one copy each.

        Raises:
            NotFound: no such group.
            UserError: the text is empty, the group is not active here or held by the loop
                guard (for an agent), or a member's send rate for the minute is spent.
            MessageTooLarge: the text does not fit a message once encrypted.
        """
        if not text.strip():
            raise UserError("the message is empty; give the text to send (or - to read it from stdin)")
        group = self.book.get(name)
        if group.state is not GroupState.ACTIVE:
            raise UserError(f"group {group.name} is {group.state.value}; nothing can be sent to it")
        held = self._loop_check(group, by)
        others = group.others(self.me)
        self._spend(others)
        outbound.send_queued(self.client, self.outbox)  # what waits goes first
        gm = secrets.token_hex(16)
        encrypted = self.sessions.encrypt(group.id, others, GroupText(group.id, self.me, gm, text).encode())
        block = {"id": group.id, "name": group.name, "gm": gm, "session": encrypted.session_id,
                 "body": encrypted.body, "by": by}
        copies = []
        for member in others:
            key = {"key": encrypted.key} if member in encrypted.lacking else {}
            copy = self._copy(member, "chat", {"group": {**block, **key}},
                              (text, {"group": group.name, "gm": gm}))
            if copy.state in ("dropped", NOT_A_CONTACT):
                self.sessions.lacking(group.id, encrypted.session_id, member)
            copies.append(copy)
        return GroupSent(gm, group.name, copies, held)

    def _loop_check(self, group: Group, by: str) -> str | None:
        """Note this message with the loop guard, before anything is encrypted or sent; the
        notice to show if it brought this identity to the cap (it still goes).

        Raises:
            UserError: this identity is held in the group and an agent wrote this (a person's
                send lifts the hold).
        """
        from follower.groups.loop_guard import Author, Decision, Direction, LoopGuard, notice

        guard = LoopGuard(self.folder)
        decision = guard.note(group.id, self.me, Author(by), Direction.SENT)
        count = guard.state(group.id, self.me).count
        if decision is Decision.HELD:
            raise UserError(f"not sent: {notice(group.name, None, count)}")
        return notice(group.name, None, count) if decision is Decision.TRIPPED else None

    def _spend(self, members: list[str]) -> None:
        """Count this message against each member's send rate, as `talk send` does per contact,
        in one write: a group message is one send to each.

        Raises:
            UserError: a member's rate for the minute is spent (nothing is sent or counted).
        """
        import time

        from follower.policy import PolicyBook
        from follower.send.sendrate import spend_each

        policies = PolicyBook(self.folder)
        contacts = [c for c in map(self.contacts.by_fingerprint, members) if c is not None]
        spend_each(self.folder, [(c, policies.rule(c).send_per_min) for c in contacts], time.time())

    def _copy(self, member: str, kind: str, extra: dict[str, Any], shown: tuple[str, dict[str, Any]]) -> Copy:
        """One pairwise message to `member`; a failure for one member is that copy's state, so
        the others still go."""
        contact = self.contacts.by_fingerprint(member)
        if contact is None:
            return Copy(member, member[:8], None, NOT_A_CONTACT)
        return send_copy(self.identity(), self.client, self.outbox, contact, kind, extra, shown)

    @property
    def sessions(self) -> GroupKeys:
        return GroupKeys(RatchetAccount(self.folder, self.identity()))


def send_copy(identity: Identity, client: RelayClient, outbox: Outbox, contact: Contact, kind: str,
              extra: dict[str, Any], shown: tuple[str, dict[str, Any]]) -> Copy:
    """One pairwise copy to `contact`, recorded in `outbox`, and how far it got: a failure of
    the relay for one member is that copy's state, so the others still go.

    Raises:
        SecurityError: the relay served ratchet keys the pinned key did not sign (nothing sent).
        MessageTooLarge: the copy does not fit a message.
    """
    member = contact.fingerprint
    try:
        inner = outbound.send(identity, client, contact, "", kind, outbox=outbox, shown=shown, **extra)
    except outbound.Queued as queued:
        return Copy(member, contact.name, queued.msg_id, "queued", str(queued.cause))
    except (RelayError, NotFound) as exc:
        return Copy(member, contact.name, None, "dropped", str(exc))
    return Copy(member, contact.name, inner.id, "stored")
