"""What an identity does towards the relay: publish, pin contacts, send, invite, join."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nacl.exceptions import CryptoError

from durable.errors import InviteError, NotFound, PinMismatch, RelayError, UserError
from follower.policy import PolicyBook
from follower.relay.client import MALFORMED, RelayClient
from follower.send.kem_keys import refresh_kem
from follower.send.outbox import Outbox
from follower.send.ratchet_send import ratchet_inner
from follower.send.resending import Way, resent_reason
from follower.send.seqcounter import next_seq
from keys.contacts import Contact, ContactBook, Source, peer_name, pinned_contact
from keys.encoding import b64d, b64e, token_hex
from keys.envelope import HYBRID_LENGTHS, MAX_BLOB, Inner, channel_tag, new_message, seal
from keys.identity import Identity, KeyBundle
from keys.invites import InviteBook, InviteCode, box_proof, new_code, parse_code, seal_request
from keys.names import check_name
from keys.sodium import PublicKey

if TYPE_CHECKING:
    from keys.ratchet.inflight import Keeping

__all__ = ["Queued", "add_contact", "create_invite", "deposit_again", "join", "resend_due", "retryable",
           "send", "send_again", "send_queued", "verify_contact"]


def checked_bundle(client: RelayClient, fp: str) -> KeyBundle:
    """The relay's bundle for `fp`, checked against that fingerprint (PinMismatch otherwise).

    The self-signature proves the sign key only: an X25519 box key cannot sign, and a bundle
    on the relay answers no challenge, so whoever publishes one may have copied another
    party's box key beside their own sign key. That gains them nothing: mail sealed to the
    box key opens only for its real holder, the inner Box of every message proves the sender
    holds its box key (the key agreement at first mail is the proof of possession), mail is
    attributed to the contact its authenticated sender names, and `ContactBook.pin` refuses
    a bundle that reuses a key already pinned to another contact. Invite joins prove the box
    key up front (`keys.invites.box_proof`).
    """
    try:
        bundle = client.bundle(fp)
    except RelayError as exc:
        if exc.status == 404:
            raise NotFound(
                f"the relay has no keys for {fp}: check the fingerprint, and that your peer "
                "ran `talk init` against this relay"
            ) from exc
        raise
    bundle.check_against(fp)
    return bundle


def add_contact(book: ContactBook, client: RelayClient, fp: str, name: str) -> Contact:
    check_name(name)
    existing = book.by_fingerprint(fp)
    if existing is not None:
        raise UserError(
            f"{fp} is already your contact {existing.name!r}; check it with "
            f"`talk verify {existing.name}`"
        )
    return book.pin(pinned_contact(name, checked_bundle(client, fp), Source.ADDED))


def verify_contact(book: ContactBook, client: RelayClient, contact: Contact) -> Contact:
    """Check that the relay still serves exactly the pinned keys, and record the check (the
    contact's `verified_at`, a "verified" line in trust.log). It widens no policy: that is
    `PolicyBook.change`, on a person's say-so.

    Raises:
        PinMismatch: the relay serves other keys; nothing is recorded.
    """
    bundle = checked_bundle(client, contact.fingerprint)
    if (bundle.sign_key, bundle.box_key) != (contact.sign_key, contact.box_key):
        raise PinMismatch(
            f"PIN MISMATCH for {contact.name}: the relay serves keys other than the pinned ones"
        )
    kem = bundle.kem_key()
    if contact.kem_key is not None and kem is not None and kem != contact.kem_key:
        raise PinMismatch(f"PIN MISMATCH for {contact.name}: the relay serves a post-quantum key, "
                          "signed by the pinned key, other than the pinned one; nothing was changed: "
                          "ask its owner over another channel whether it restored an old identity")
    if contact.kem_key is None:
        refresh_kem(book, client, contact, force=True)
    checked = book.mark_verified(contact.name)
    PolicyBook(book.folder).note(checked, "verified", verified_at=checked.verified_at)
    return checked


def send(identity: Identity, client: RelayClient, contact: Contact, text: str,
         kind: str = "chat", outbox: Outbox | None = None, folder: Path | None = None,
         shown: tuple[str, dict[str, Any]] | None = None, msg_id: str | None = None,
         **extra: Any) -> Inner:
    """Seal and deposit one message; sealing refuses an oversize text before any network use.

    The message carries the next number of this identity's count of messages to `contact`,
    kept in the identity folder (`folder`, else the outbox's), so the peer can tell a dropped,
    late or replayed message. With an outbox, the sealed message is recorded before it leaves
    (a crash then still knows it, and a resend repeats the same id and number) and marked
    stored once the relay has it. `shown` is what the outbox keeps of a message whose words
    travel elsewhere than its text (a group message's): the text to preview, and fields to list.
    `msg_id` fixes the message's id (a file transfer's, chosen before its upload).

    Raises:
        Queued: (only with an outbox) the relay could not take it now; it stays queued.
        RelayError, NotFound: the relay refused it for good (the outbox marks it dropped), or
            there is no outbox to queue it in.
    """
    peer = PublicKey(contact.box_key)
    home = folder if folder is not None else outbox.folder if outbox is not None else None
    if home is None:
        raise ValueError("send needs the identity folder (folder= or outbox=) to number the message")
    # With an outbox, the message's synced record there keeps its number (`Outbox.sent`).
    with next_seq(home, contact.fingerprint, recorded=outbox is not None) as seq:
        inner = new_message(identity.fingerprint, contact.fingerprint, text, kind, seq, msg_id, **extra)
        blob, keep = _sealed(identity, client, contact, home, inner, outbox is not None)
    tag = channel_tag(identity.box_secret, peer, contact.fingerprint)
    if outbox is None:
        deposit(client, contact.fingerprint, contact.name, tag, blob)
        return inner
    preview, noted = shown if shown is not None else (text, {})
    outbox.sent(inner.id, contact.fingerprint, contact.name, kind, preview, tag, b64e(blob), seq=seq,
                **{k: v for k, v in extra.items() if k in ("task", "hops")}, **noted)
    try:
        _deposit_recorded(client, contact, outbox, inner.id, tag, blob, keep)
    finally:
        if keep is not None:
            keep()  # kept while the relay stored it, unless the request never left
    return inner


def _deposit_recorded(client: RelayClient, contact: Contact, outbox: Outbox, msg_id: str,
                      tag: str, blob: bytes, meanwhile: Callable[[], None] | None = None) -> None:
    """Deposit a message the outbox already records, and record how that went; `meanwhile` as
    `RelayClient.deposit` runs it.

    Raises:
        Queued: the relay could not take it now; it stays queued.
        RelayError, NotFound: the relay refused it for good (the outbox marks it dropped).
    """
    try:
        deposit(client, contact.fingerprint, contact.name, tag, blob, meanwhile)
    except (RelayError, NotFound) as exc:
        if not retryable(exc):
            # Final: nothing is left queued to arrive later, so a caller may send again.
            outbox.receipts([(msg_id, "dropped", f"the relay refused it: {exc}")])
            raise
        outbox.queued()
        raise Queued(msg_id, exc) from exc
    outbox.stored(msg_id)


def send_again(identity: Identity, client: RelayClient, contact: Contact, outbox: Outbox, inner: Inner,
               way: Way, sends: int, answered: str) -> None:
    """Send `inner` again, under its own id, as copy number `sends`, after `contact` refused the
    last copy in the receipt `answered` (`follower.send.resending` says why and how). It goes in the
    session `contact` offers now (the caller forgot ours first for a new one); `Way.RENUMBERED`
    also gives it the next number, which the caller moved past what `contact` has seen. The
    outbox records the copy before it leaves, so a kill before the deposit leaves it to be
    deposited again by whoever takes that receipt again, with the same blob.

    Raises:
        PinMismatch: the relay served ratchet keys the pinned key did not sign.
        RelayError, NotFound: the relay refused it for good (the outbox marks it dropped).
    """
    renumbered = None
    if way is Way.RENUMBERED:
        with next_seq(outbox.folder, contact.fingerprint, recorded=True) as seq:
            inner = inner._replace(seq=seq)
            blob, keep = _sealed(identity, client, contact, outbox.folder, inner, True)
        renumbered = (contact.fingerprint, seq)
    else:
        blob, keep = _sealed(identity, client, contact, outbox.folder, inner, True)
    if keep is not None:
        keep()  # a copy sent again is rare: kept at once
    tag = channel_tag(identity.box_secret, PublicKey(contact.box_key), contact.fingerprint)
    outbox.recovered(inner.id, tag, b64e(blob), sends, way, resent_reason(way, sends), answered,
                     renumbered)
    deposit_again(client, contact, outbox, inner.id, tag, blob)


def deposit_again(client: RelayClient, contact: Contact, outbox: Outbox, msg_id: str, tag: str,
                  blob: bytes) -> None:
    """Deposit a copy the outbox records as sent again; queued if the relay cannot take it now
    (the follower or the next command deposits it).

    Raises:
        RelayError, NotFound: the relay refused it for good (the outbox marks it dropped).
    """
    with contextlib.suppress(Queued):
        _deposit_recorded(client, contact, outbox, msg_id, tag, blob)


def _sealed(identity: Identity, client: RelayClient, contact: Contact, home: Path, inner: Inner,
            recorded: bool) -> tuple[bytes, Keeping | None]:
    """`inner` sealed to `contact`, in its Olm session when it offers one. The outbox keeps this
    very blob, so a resend repeats it and never takes another ratchet step; a message the outbox
    records (`recorded`) also keeps what it said until it settles, so that if the contact refuses
    it for a reason sending again cures (a lost session, a reused number) it can be sealed anew
    (`send_again`): the second item keeps that copy, to call before the send returns."""
    sealed = ratchet_inner(identity, client, contact, home, inner, recorded)
    envelope, keep = (inner, None) if sealed is None else sealed
    return seal(envelope, identity.box_secret, PublicKey(contact.box_key), contact.kem_key), keep


class Queued(Exception):
    """The relay did not take the message now, but it is in the outbox and will be sent with the
    same id (and number) by the follower, or by the next `talk send` or `talk receive`."""

    def __init__(self, msg_id: str, cause: Exception) -> None:
        super().__init__(str(cause))
        self.msg_id = msg_id
        self.cause = cause


def retryable(exc: Exception) -> bool:
    """A failure that may pass later: no answer, a limit (429, 507), or the relay's own fault;
    not an answer outside the protocol (a broken or hostile relay), nor a lasting refusal."""
    if not isinstance(exc, RelayError) or exc.code == MALFORMED:
        return False  # NotFound: no such mailbox on this relay
    return exc.status is None or exc.status in (408, 429, 507) or exc.status >= 500


def send_queued(client: RelayClient, outbox: Outbox) -> int:
    """Deposit what earlier sends left queued; one stat when nothing is. Returns how many went.

    Stops at the first failure (the relay is still away) and leaves the mark for next time.
    A concurrent send still in flight may be deposited twice: same id, so the peer shows it once.
    """
    if not outbox.queued_mark.exists():
        return 0
    outbox.queued_mark.unlink(missing_ok=True)
    sent = 0
    for entry in outbox.entries().values():
        if entry.state != "sent" or not entry.blob:
            continue
        try:
            deposit(client, entry.to, entry.name, entry.tag, b64d(entry.blob))
        except (RelayError, NotFound) as exc:
            if retryable(exc):
                outbox.queued()
                break
            outbox.receipts([(entry.id, "dropped", f"the relay refused it: {exc}")])
            continue
        outbox.stored(entry.id)
        sent += 1
    return sent


def deposit(client: RelayClient, fp: str, name: str, tag: str, blob: bytes,
            meanwhile: Callable[[], None] | None = None) -> None:
    try:
        client.deposit(fp, tag, blob, meanwhile)
    except RelayError as exc:
        if exc.status == 404:
            raise NotFound(
                f"the relay at {client.url} has no mailbox for {name}: are you both on the same relay?"
            ) from exc
        if exc.status == 413 and len(blob) in HYBRID_LENGTHS:
            # Never sealed again without the KEM key to get through: that would be a downgrade.
            raise RelayError(
                f"the relay at {client.url} refused a post-quantum message of {len(blob):,} bytes as too "
                f"large ({exc.message}): it predates post-quantum sealing, whose largest message needs "
                f"{MAX_BLOB:,}; shorten the message, or ask the relay's operator to upgrade",
                status=exc.status, code=exc.code) from exc
        raise


def resend_due(client: RelayClient, outbox: Outbox, now: float, after: float) -> int:
    """Deposit again every message that has waited too long for a receipt: same id, same blob."""
    sent = 0
    for entry in outbox.entries().values():
        if entry.resend_due(now, after):
            outbox.resent(entry.id)  # first: a crash here costs one attempt, never a double
            deposit(client, entry.to, entry.name, entry.tag, b64d(entry.blob))
            sent += 1
    return sent


def create_invite(identity: Identity, client: RelayClient, invites: InviteBook,
                  days: float) -> InviteCode:
    code = new_code(identity.fingerprint, days, time.time())
    client.open_invite(identity, code.tag, code.expires)
    invites.add(code)
    return code


REDEEM_ERRORS = {
    404: "this invite code is unknown to the relay or was revoked; ask for a new one",
    409: "this invite code was already used; ask the inviter for a new one",
    410: "this invite code has expired; ask the inviter for a new one",
}


def join(identity: Identity, client: RelayClient, book: ContactBook, code_text: str,
         name: str | None) -> Contact:
    """Pin the inviter (checked against the code) and deposit our sealed contact request."""
    code = parse_code(code_text)
    if code.fingerprint == identity.fingerprint:
        raise InviteError("this is your own invite code; give it to the peer you want to reach")
    if code.expired(time.time()):
        raise InviteError(REDEEM_ERRORS[410])
    bundle = checked_bundle(client, code.fingerprint)
    existing = book.by_fingerprint(code.fingerprint)
    if existing is None:
        book.check_free(bundle, "to join")  # before the code is spent on a contact we could not pin
    contact_name = name or peer_name(bundle.name, bundle.fingerprint, {c.name for c in book.all()})
    if existing is None and name is not None and any(c.name == name for c in book.all()):
        raise UserError(f"the name {name!r} is already used for another contact; pick another")
    own = identity.bundle()
    try:
        proof = box_proof(code, own, identity.box_secret, PublicKey(bundle.box_key))
    except CryptoError as exc:  # a degenerate X25519 key: no agreement, no proof, no mail
        raise InviteError(
            f"the keys published for {code.fingerprint} hold an unusable box key, so nothing can be "
            "sealed to them; nothing was sent: ask the inviter to check `talk id`") from exc
    blob = seal_request(code, own, proof, token_hex(16))
    try:
        client.redeem(code.tag, blob)
    except RelayError as exc:
        if exc.status in REDEEM_ERRORS:
            raise InviteError(REDEEM_ERRORS[exc.status]) from exc
        raise
    return existing or book.pin(pinned_contact(contact_name, bundle, Source.JOINED))
