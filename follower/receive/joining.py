"""Contact requests that come with our invite codes: pin the joiner, tell it, hand the news on.

The one mail taking sends (receipts aside) is the "accepted" note to a joiner just pinned. A
request that fails its checks spends its code all the same: the relay let it through once.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Protocol

from durable.errors import NotFound, RelayError
from follower.receive.faults import blames_message, refusal_reason
from follower.receive.outcome import Emit, Outcome, Report
from follower.relay.client import Fetched, RelayClient
from follower.send.outbound import send
from keys.contacts import Contact, ContactBook, Source, peer_name, pinned_contact
from keys.encoding import utc_now_iso
from keys.identity import Identity
from keys.invites import InviteBook, InviteCode, InviteState, open_request, state_of


class Taken(Protocol):
    """The ids this identity has taken (`follower.receive.inbound.Dedup` is one)."""

    def __contains__(self, msg_id: object) -> bool: ...

    def add(self, msg_id: str) -> None: ...


@dataclass
class Joining:
    identity: Identity
    client: RelayClient
    contacts: ContactBook
    invites: InviteBook

    def take(self, item: Fetched, code: InviteCode, seen: Taken, emit: Emit, report: Report) -> Outcome:
        """A joiner's contact request: pin the joiner, tell it, hand the news on, remember the
        request's id — in that order, so a crash anywhere before the id is remembered takes the
        request again, and a second telling is all it costs."""
        try:
            joined = self.pin(item, code, seen, report)
        except Exception as exc:
            if blames_message(exc):  # the relay let the code through once: the invite is spent
                self.refuse(code, refusal_reason(exc))
            raise
        if isinstance(joined, Outcome):
            return joined
        request_id, contact = joined
        self.tell(contact, report)
        emit({
            "id": request_id, "from": contact.fingerprint, "name": contact.name,
            "text": f"{contact.name} joined with your invite code", "ts": utc_now_iso(),
            "kind": "contact_accepted",
        })
        seen.add(request_id)
        return Outcome.DELIVERED

    def pin(self, item: Fetched, code: InviteCode, seen: Taken,
            report: Report) -> tuple[str, Contact] | Outcome:
        """(request id, contact) of a joiner now pinned, its invite marked used; or why not.
        A request that fails its checks (no proof of its box key, a key pinned to another
        contact) is refused, and its code with it: the relay let the code through once."""
        request_id, bundle = open_request(code, item.blob, self.identity.box_secret)
        self.contacts.check_free(bundle, "a contact request from")
        if request_id in seen:
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
            pinned_contact(peer_name(bundle.name, bundle.fingerprint, names), bundle, Source.INVITED)
        )
        self.invites.set_state(code.tag, InviteState.USED, used_by=bundle.fingerprint)
        return request_id, contact

    def tell(self, contact: Contact, report: Report) -> None:
        """The one mail taking sends (receipts aside): "accepted" to a joiner just pinned."""
        try:
            send(self.identity, self.client, contact,
                 f"{self.identity.name} accepted your contact request", kind="contact_accepted",
                 folder=self.contacts.folder)
        except NotFound:
            # The joiner has no mailbox on this relay (it never published its keys): its fault,
            # and no reason to stop the inviter's mail. It learns of the acceptance when it
            # publishes and is written to.
            report.notes.append(f"{contact.name} joined but has no mailbox on the relay to tell")
        except RelayError as exc:
            if not joiners_doing(exc):
                raise
            # Its mailbox is full or refuses this mail: what the joiner can bring about, so it
            # must not hold back the inviter's mail either. The same later mail tells it.
            report.notes.append(f"{contact.name} joined but its mailbox refused the news ({exc})")

    def refuse(self, code: InviteCode, reason: str) -> None:
        """Spend an open invite whose request was refused: the relay let its code through once."""
        record = self.invites.all().get(code.tag)
        if record is not None and state_of(record, time.time()) is InviteState.OPEN:
            self.invites.set_state(code.tag, InviteState.USED, used_by=None, refused=reason)


def joiners_doing(exc: RelayError) -> bool:
    """Whether the relay refused mail to a joiner for what the joiner controls (its mailbox full,
    rate limited, too large): any 4xx, or 507. No status (unreachable) or another 5xx is the way
    to the relay failing, which `MACHINE_FAULTS` leaves unacked."""
    return exc.status is not None and (400 <= exc.status < 500 or exc.status == 507)
