"""Taking mail: fetch → open → hand on → remember → ack, one message at a time.

A message is acked only after the caller has handed it on and its id is on disk, so a crash
or a dead relay at any point leaves it on the relay; when it comes again the id is known and
it is acked without being handed on twice. Mail that cannot be opened, or is sealed by a key
no contact pins, is never handed on: it is deleted and reported.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Protocol

from nacl.public import PublicKey

from follower.client import Fetched, RelayClient
from follower.outbound import send
from keys.contacts import Contact, ContactBook, Source, free_name, pinned_contact
from keys.envelope import channel_tag, open_blob
from keys.errors import SecurityError
from keys.identity import Identity
from keys.invites import InviteBook, InviteCode, InviteState, open_request, state_of

Emit = Callable[[dict[str, Any]], None]


class Dedup(Protocol):
    """Where the ids already handed on are remembered (a seen-ids file, or the spool)."""

    def __contains__(self, msg_id: object) -> bool: ...

    def add(self, msg_id: str) -> None: ...


class Outcome(StrEnum):
    DELIVERED = "delivered"
    DUPLICATE = "duplicate"
    REFUSED = "refused"  # security: tampered, unknown sender
    STALE_INVITE = "stale_invite"  # a request for an invite that is used, revoked or expired


@dataclass
class Report:
    delivered: int = 0
    duplicates: int = 0
    refused: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


@dataclass
class Inbox:
    identity: Identity
    client: RelayClient
    contacts: ContactBook
    invites: InviteBook
    seen: Dedup
    batch_acks: bool = False

    def routes(self, peers: list[Contact] | None) -> tuple[dict[str, Contact], dict[str, InviteCode]]:
        """The tags to fetch: the chosen contacts' channels to us, plus our live invites."""
        own = self.identity.box_secret
        chosen = self.contacts.all() if peers is None else peers
        channels = {
            channel_tag(own, PublicKey(c.box_key), self.identity.fingerprint): c for c in chosen
        }
        invites = {code.tag: code for code in self.invites.live(time.time())}
        return channels, invites

    def receive(self, emit: Emit, peers: list[Contact] | None = None, limit: int = 100) -> Report:
        """Take all waiting mail. With `batch_acks`, a page is acked by the next fetch (one
        request per page instead of one per message); otherwise each message is acked at once,
        so a one-shot `talk receive` cut off mid-way leaves only the unacked rest behind."""
        report = Report()
        channels, invites = self.routes(peers)
        tags = [*channels, *invites]
        if not tags:
            return report
        handled: set[str] = set()
        taken: list[str] = []
        more = True
        while more or taken:
            mail, more = self.client.fetch(self.identity, tags, limit, ack=taken)
            taken = []
            fresh = [m for m in mail if m.id not in handled]
            for item in fresh:
                handled.add(item.id)
                outcome = self.take(item, channels, invites, emit, report)
                if self.batch_acks:
                    taken.append(item.id)
                else:
                    self.client.ack(self.identity, [item.id])
                if outcome is Outcome.DELIVERED:
                    report.delivered += 1
                elif outcome is Outcome.DUPLICATE:
                    report.duplicates += 1
            if not fresh and not taken:
                break  # the relay keeps serving what we acked: stop rather than spin
        return report

    def take(self, item: Fetched, channels: dict[str, Contact], invites: dict[str, InviteCode],
             emit: Emit, report: Report) -> Outcome:
        try:
            if item.tag in invites:
                return self.take_request(item, invites[item.tag], emit, report)
            return self.take_message(item, emit)
        except SecurityError as exc:
            report.refused.append(exc.message)
            return Outcome.REFUSED

    def take_message(self, item: Fetched, emit: Emit) -> Outcome:
        contact, inner = open_blob(
            item.blob, self.identity.box_secret, self.identity.fingerprint,
            self.contacts.by_box_key, lambda c: c.fingerprint,
        )
        if inner.id in self.seen:
            return Outcome.DUPLICATE
        emit({
            **inner.extra, "id": inner.id, "from": inner.sender, "name": contact.name,
            "text": inner.text, "ts": inner.ts, "kind": inner.kind,
        })
        self.seen.add(inner.id)
        return Outcome.DELIVERED

    def take_request(self, item: Fetched, code: InviteCode, emit: Emit, report: Report) -> Outcome:
        request_id, bundle = open_request(code, item.blob)
        if request_id in self.seen:
            return Outcome.DUPLICATE
        record = self.invites.all()[code.tag]
        state = state_of(record, time.time())
        # A crash after pinning but before the id was recorded sees its own USED mark: go on.
        replay = state is InviteState.USED and record.get("used_by") == bundle.fingerprint
        if state is not InviteState.OPEN and not replay:
            report.notes.append(f"dropped a contact request for an invite that is {state.value}")
            return Outcome.STALE_INVITE
        names = {c.name for c in self.contacts.all()}
        contact = self.contacts.pin(
            pinned_contact(free_name(bundle.name, names), bundle, Source.INVITED)
        )
        self.invites.set_state(code.tag, InviteState.USED, used_by=bundle.fingerprint)
        note = send(self.identity, self.client, contact,
                    f"{self.identity.name} accepted your contact request", kind="contact_accepted")
        emit({
            "id": request_id, "from": contact.fingerprint, "name": contact.name,
            "text": f"{contact.name} joined with your invite code", "ts": note.ts,
            "kind": "contact_accepted",
        })
        self.seen.add(request_id)
        return Outcome.DELIVERED
