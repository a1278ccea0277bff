"""Post-quantum keys for contacts pinned before them: fetched, checked, pinned, and said so.

A contact pinned before ML-KEM keys existed (or while its relay served none) has no KEM key, so
mail to it is sealed classic. A send to it first asks the relay for its bundle, at most once per
CHECK_EVERY_S, and pins the KEM key there if the signing key already pinned for that contact
signed it (`ContactBook.pin_kem`); the pin is told once, as a note for the caller to show and a
line in trust.log. A relay that withholds the key, serves a forged one, or does not answer
changes nothing: the contact stays "post-quantum: no" and mail goes classic, as before. Once
pinned, every blob to the contact is hybrid, and no relay can undo that.
"""

from __future__ import annotations

import time

from durable.errors import TalkError
from follower.relay.client import RelayClient
from keys.contacts import Contact, ContactBook
from keys.identity import KeyBundle

__all__ = ["CHECK_EVERY_S", "refresh_kem"]

CHECK_EVERY_S = 3600.0  # how often a send to a contact without a KEM key asks the relay for one


def refresh_kem(book: ContactBook, client: RelayClient, contact: Contact, now: float | None = None,
                force: bool = False) -> tuple[Contact, str | None]:
    """`contact` as it stands after asking the relay for its KEM key when it has none and none
    was asked for lately (`force`: ask now); and the note to show when one was just pinned."""
    now = time.time() if now is None else now
    if contact.kem_key is not None or not (
            force or contact.kem_checked_at is None or now - contact.kem_checked_at >= CHECK_EVERY_S):
        return contact, None
    bundle: KeyBundle | None
    try:
        bundle = client.bundle(contact.fingerprint)
    except (TalkError, OSError):
        bundle = None  # asked again after CHECK_EVERY_S; the send itself says if the relay is away
    pinned = book.pin_kem(contact.fingerprint, bundle, now)
    if pinned.kem_key is None:
        return pinned, None
    from follower.policy import PolicyBook

    PolicyBook(book.folder).note(pinned, "post-quantum key pinned", kem_pinned_at=pinned.kem_pinned_at)
    return pinned, (f"pinned the post-quantum key of {pinned.name}, signed by its pinned key: mail to "
                    f"{pinned.name} is now sealed with X25519 and ML-KEM-768")
