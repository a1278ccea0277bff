"""Receipts for our own mail: the outbox moves on, and what a refusal brings back is sent again.

A peer may speak only of mail we sent to it. A refusal of mail no receipt ever said arrived
(`follower.send.resending.never_reached`) brings its copy back, sent the way
`follower.send.resending` decides: in the same session, a new one, or under a fresh number; a
group copy refused for want of our key goes again with the key. Refusals are final once the
sends run out, and the outbox says why.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from durable.errors import NotFound, RelayError, SecurityError
from follower.groups import group_inbound
from follower.receive import receipts
from follower.relay.client import RelayClient
from follower.send.outbound import deposit_again, send_again
from follower.send.outbox import Entry, Outbox
from follower.send.resending import final_reason, never_reached, resends
from follower.send.seqcounter import move_past
from keys.contacts import Contact
from keys.encoding import b64d
from keys.envelope import Inner
from keys.groups.sessions import NO_GROUP_KEY, GroupKeys
from keys.identity import Identity
from keys.ratchet.inflight import Inflight
from keys.ratchet.sessions import RatchetSessions


@dataclass
class Recovery:
    """`sessions` and `group_keys` are the taking side's own (one open store per process);
    `not_while_holding` raises `Busy` while the page being taken holds session locks, which a
    send would wait for forever."""

    identity: Identity
    client: RelayClient
    folder: Path
    sessions: RatchetSessions
    group_keys: GroupKeys
    not_while_holding: Callable[[str], None]

    def take(self, contact: Contact, inner: Inner) -> None:
        """Take receipt `inner` from `contact` (opened, and checked to be a receipt from it)."""
        outbox = Outbox(self.folder)
        mine = outbox.entries()
        # A peer may speak only of mail we sent to that peer.
        items = [i for i in receipts.parse_items(inner)
                 if i[0] in mine and mine[i[0]].to == contact.fingerprint]
        # Refusals this very receipt brought back before a kill: acted on already. Their copy
        # is deposited again (same blob: the receiver keeps one), nothing else is done twice.
        acted = {i for i, _, _ in items if mine[i].answered == inner.id}
        items = [i for i in items if i[0] not in acted]
        unreached = never_reached(mine, items)
        highest = {i: n for i, n in receipts.replay_highest(inner).items() if i in unreached}
        forget, ways = resends(mine, items, highest, unreached)
        inflight = Inflight(self.folder, self.identity)
        copies = {i: kept for i in ways if (kept := inflight.take(i)) is not None}  # before the drop below
        ways = {i: way for i, way in ways.items() if i in copies}
        if forget or ways:
            self.not_while_holding("a receipt that sends mail again")
        keyless = [(i, reason) for i, state, reason in items
                   if state == "refused" and reason.startswith(NO_GROUP_KEY) and i in unreached]
        again = []  # read before the in-flight copies are dropped below
        for msg_id, reason in keyless:
            block = group_inbound.block_to_resend(self.group_keys, inflight.take(msg_id), reason)
            if block is not None:
                again.append((mine[msg_id], block))
        if again:
            self.not_while_holding("a receipt that sends a group copy again")
        final = {i for i, state, _ in items if state == "refused" and i not in ways}
        outbox.receipts([(i, state, final_reason(mine[i].sends, reason) if i in final else reason)
                         for i, state, reason in items])
        for _, reason in keyless:
            group_inbound.lacking_key(self.folder, self.group_keys, contact, reason)
        inflight.drop([i for i, _, _ in items if i not in ways])
        if highest:
            move_past(self.folder, contact.fingerprint, max(highest.values()))
        if forget:
            # The peer lost the session these went in, or cannot open it: the next starts a new one.
            self.sessions.forget(contact.fingerprint)
        for msg_id, way in ways.items():
            # Failing, the outbox says why (dropped), or the message stays refused; the receipt is taken.
            with contextlib.suppress(SecurityError, RelayError, NotFound):
                send_again(self.identity, self.client, contact, outbox, copies[msg_id], way,
                           mine[msg_id].sends + 1, inner.id)
        for msg_id in acted:
            entry = mine[msg_id]
            if entry.state == "sent" and entry.blob:
                with contextlib.suppress(RelayError, NotFound):
                    deposit_again(self.client, contact, outbox, msg_id, entry.tag, b64d(entry.blob))
        for entry, block in again:
            self.resend_group_copy(contact, outbox, entry, block)

    def resend_group_copy(self, contact: Contact, outbox: Outbox, refused: Entry,
                          block: dict[str, Any]) -> None:
        """Send `contact` the group message it refused for want of our key again, once, in a new
        message (the refused id is in its seen list: the same id would be a duplicate there).
        After the refused copy's in-flight record is dropped, so a kill in between loses this
        copy rather than sending it twice. How it went is the new copy's state in the outbox."""
        from follower.groups.group_mail import send_copy  # the group sender's side: only when it sends again

        shown = (refused.text, {"group": block["name"], "gm": block["gm"]})
        with contextlib.suppress(SecurityError):  # nothing was sent: the refused copy says why
            send_copy(self.identity, self.client, outbox, contact, "chat", {"group": block}, shown)
