"""Receipts: what the receiving side tells a sender about each of its messages.

A receipt is ordinary sealed mail of kind "receipt" on the pair's receipt tag, listing
(message id, state, reason) items; receipts never produce receipts. They are gathered while
mail is taken and sent once per peer at the end, so a page of mail costs one receipt message.
Sending is best effort: a receipt lost on the way is made good by the sender's resend, which
the receiver answers with `duplicate`.

A receipt to a peer whose pre-key messages this side opened carries an answer in the session
they started (`keys.ratchet.envelope`: why), made when the receipt is sent, after the page that
opened them is committed, so the session it steps is saved first (`keys.ratchet.sessions`).

The follower defers its batches (`ReceiptBatch(delay=…)`): a receipt sent the instant a fetch
returns would tell the relay which mailbox wrote to which, so it leaves a random pause later,
on the follower's next upkeep tick after it is due, with whatever was queued for the same peer
since (a busy stream is answered once per pause, not once per message).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from functools import lru_cache
from typing import Any, NamedTuple

from durable.errors import TalkError
from follower.relay.client import RelayClient
from keys.contacts import Contact
from keys.envelope import Inner, new_message, receipt_tag, seal
from keys.gate import MAX_REASON, RECEIPT_STATES, Invalid, check_receipts
from keys.identity import Identity
from keys.ratchet.envelope import ANSWER_FIELD
from keys.sodium import PrivateKey, PublicKey

__all__ = ["Due", "ReceiptBatch", "Sealed", "deposit", "seal_all", "seal_receipts"]

KIND = "receipt"
STATES = RECEIPT_STATES
PER_MESSAGE = 300  # items per receipt message: far below the 64 KiB envelope


def receipt_message(identity: Identity, contact: Contact, items: list[dict[str, Any]],
                    answer: dict[str, Any] | None = None) -> Inner:
    extra: dict[str, Any] = {ANSWER_FIELD: answer} if answer is not None else {}
    return new_message(identity.fingerprint, contact.fingerprint, f"{len(items)} receipt(s)",
                       kind=KIND, receipts=items, **extra)


@lru_cache(maxsize=1024)
def _tag_to(own: bytes, peer: bytes, peer_fp: str) -> str:
    """A key agreement per flush would be the costliest step of a follower's drain."""
    return receipt_tag(PrivateKey(own), PublicKey(peer), peer_fp)


class Sealed(NamedTuple):
    """A receipt message ready to go to `contact` under `tag`."""

    contact: Contact
    tag: str
    blob: bytes


def seal_receipts(identity: Identity, contact: Contact, items: list[dict[str, Any]],
                  answer: dict[str, Any] | None = None) -> list[Sealed]:
    """`items` as receipt messages to `contact`; `answer` (a session's answer, `Answer`) rides the
    first."""
    peer = PublicKey(contact.box_key)
    tag = _tag_to(bytes(identity.box_secret), contact.box_key, contact.fingerprint)
    sealed = []
    for start in range(0, len(items), PER_MESSAGE):
        inner = receipt_message(identity, contact, items[start:start + PER_MESSAGE], answer)
        sealed.append(Sealed(contact, tag, seal(inner, identity.box_secret, peer, contact.kem_key)))
        answer = None
    return sealed


class Due(NamedTuple):
    """Receipt items owed to `contact`, with the session answer the first carries (None: none)."""

    contact: Contact
    items: list[dict[str, Any]]
    answer: dict[str, Any] | None


def seal_all(identity: Identity, due: list[Due]) -> list[Sealed]:
    """`due` as receipt messages; uses no session or store (`ReceiptBatch.take_due` made the
    answers), so it may run outside the follower's turn."""
    return [m for d in due for m in seal_receipts(identity, d.contact, d.items, d.answer)]


def deposit(client: RelayClient, sealed: list[Sealed]) -> int:
    """Deposit `sealed` in order; how many peers could not be told (a peer's later messages are not
    tried once one fails). Touches no session or store: any thread may send what was sealed."""
    failed: set[str] = set()
    for message in sealed:
        contact = message.contact
        if contact.fingerprint in failed:
            continue
        try:
            client.deposit(contact.fingerprint, message.tag, message.blob)
        except TalkError as exc:
            failed.add(contact.fingerprint)
            # Imported here: logging costs `talk receive` ~5 ms of start-up, and this is its only use.
            import logging

            logging.getLogger("talk.follower").info(
                "receipts to %s not sent (%s); their resend will bring them", contact.name, exc)
    return len(failed)


def replay_highest(inner: Inner) -> dict[str, int]:
    """{id: the highest seq the receiver has seen from us} of the items refusing a reused number
    (`keys.gate.check_receipts`); none unless every item is well formed."""
    try:
        items = check_receipts(inner.extra.get("receipts"))
    except Invalid:
        return {}
    return {i["ref"]: i["highest"] for i in items if i["state"] == "refused" and "highest" in i}


def parse_items(inner: Inner) -> list[tuple[str, str, str]]:
    """The (id, state, reason) items of a receipt; none unless every item is well formed (the
    gate refuses such a receipt on arrival; this holds for an Inner built any other way too)."""
    try:
        items = check_receipts(inner.extra.get("receipts"))
    except Invalid:
        return []
    return [(i["ref"], i["state"], i["reason"]) for i in items]


Items = list[dict[str, Any]]
# A session's answer for a peer (`keys.ratchet.envelope.answer_field`), made as its receipt goes;
# None: there is none to give.
Answer = Callable[[Contact], "dict[str, Any] | None"]


class ReceiptBatch:
    """Receipts gathered while taking mail, by peer, sent together by `flush`; with a `delay`
    (seconds, drawn per flush), `flush` only queues them and `take_due` takes them later.
    (A plain class: see `follower`'s docstring.)"""

    def __init__(self, delay: Callable[[], float] | None = None, answer: Answer | None = None) -> None:
        self.pending: dict[str, tuple[Contact, Items]] = {}
        self.delay = delay
        self.queued: list[tuple[float, Contact, Items]] = []
        # Peers whose pre-key messages were opened: their next receipt carries `answer`'s answer.
        self.unanswered: set[str] = set()
        self.answer = answer

    def add(self, contact: Contact, ref: str, state: str, reason: str = "",
            highest: int | None = None) -> None:
        """`highest`: on a refusal of a reused number, the highest seq seen from `contact`."""
        entry = self.pending.setdefault(contact.fingerprint, (contact, []))
        item: dict[str, Any] = {"ref": ref, "state": state, "reason": reason[:MAX_REASON]}
        if highest is not None:
            item["highest"] = highest
        entry[1].append(item)

    def answer_session(self, contact: Contact) -> None:
        """Have the next receipt to `contact` answer in the session its pre-key messages started."""
        self.unanswered.add(contact.fingerprint)

    def flush(self, identity: Identity, client: RelayClient) -> int:
        """Send what is gathered (or queue it, with a delay); how many peers could not be told."""
        pending, self.pending = self.pending, {}
        if self.delay is None:
            return self._send_all(identity, client, list(pending.values()))
        due = time.monotonic() + self.delay()
        self.queued += [(due, contact, items) for contact, items in pending.values()]
        return 0

    def take_due(self, everything: bool = False) -> list[Due]:
        """The receipts owed to each peer one of whose queued batches has waited out its pause
        (to every peer when stopping), taken off the queue, one `Due` per peer with the session
        answer it owes. A peer's later batches go with its first: the deposit's moment is still
        that batch's random pause after the fetch behind it, and a stream of messages is then
        answered once per pause, not once per message. An answer steps the sessions, so this
        runs where they may be used; `seal_all` and `deposit`, which use neither, may run
        anywhere after."""
        now = time.monotonic()
        going = {c.fingerprint for due, c, _ in self.queued if everything or due <= now}
        if not going:
            return []
        ready: dict[str, tuple[Contact, Items]] = {}
        for _, contact, items in self.queued:
            if contact.fingerprint in going:
                ready.setdefault(contact.fingerprint, (contact, []))[1].extend(items)
        self.queued = [q for q in self.queued if q[1].fingerprint not in going]
        return [Due(contact, items, self._answer(contact)) for contact, items in ready.values()]

    def next_due(self) -> float | None:
        """When the earliest queued batch may go (monotonic), if any waits."""
        return min((due for due, _, _ in self.queued), default=None)

    def __len__(self) -> int:
        return sum(len(items) for _, items in self.pending.values())

    def _answer(self, contact: Contact) -> dict[str, Any] | None:
        """The answer owed to `contact`, given once: if its receipt is lost, the peer's next message
        is a pre-key message still, and answered again."""
        if self.answer is None or contact.fingerprint not in self.unanswered:
            return None
        self.unanswered.discard(contact.fingerprint)
        return self.answer(contact)

    def _send_all(self, identity: Identity, client: RelayClient, batches: list[tuple[Contact, Items]]) -> int:
        due = [Due(contact, items, self._answer(contact)) for contact, items in batches]
        return deposit(client, seal_all(identity, due))


def as_json(items: list[tuple[str, str, str]]) -> list[dict[str, Any]]:
    return [{"ref": r, "state": s, "reason": why} for r, s, why in items]
