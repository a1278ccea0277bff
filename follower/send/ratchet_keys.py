"""The client side of the relay's ratchet key directory: keep our keys there, claim a peer's.

Publishing. The relay should always hold our card, a fallback key and enough one-time keys
for the peers that will start sessions with us. Each publication sends what the Olm account
has not yet marked published, then marks it; when the relay says fewer than `LOW` one-time
keys are left, new ones are made to bring it back to `TARGET`. A fresh fallback key is made
when asked (`talk init`, each follower start): the relay replaces its old one, and the Olm
account still answers to the one before, so sessions already begun on it keep working.

Crashes and races. Keys are generated and saved before they are sent, and marked published
only after the relay has them; a crash in between sends them again next time, and the relay
keeps only ids above every id it ever had, so no key is handed out twice. Two processes
publishing at once send overlapping sets, with the same effect.

Claiming. A claim answers a card and a key that the relay could have made up; both must be
signed by the signing key pinned for that contact, or it is a PIN MISMATCH, as for bundles.
Reading a contact's card alone (`published_card`, for `talk verify` before any session) takes
no key out and is checked the same way.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from durable.errors import PinMismatch, RelayError
from follower.relay.client import RelayClient
from keys.contacts import Contact
from keys.identity import Identity
from keys.ratchet.account import RatchetAccount, card_for, fallback_keys, new_fallback_key, unpublished_keys
from keys.ratchet.card import (
    Claim,
    ForgedRatchetKey,
    Publication,
    RatchetCard,
    RatchetKeyError,
    verify_card,
    verify_claim,
)

__all__ = ["LOW", "TARGET", "claim_ratchet_key", "publish_ratchet_keys", "published_card", "top_up"]

LOW = 20  # fewer one-time keys than this left on the relay: top up
TARGET = 50  # ... to this many (vodozemac's own most unpublished keys at once)


def top_up(left: int, low: int = LOW, target: int = TARGET) -> int:
    """How many one-time keys to make, with `left` of them waiting on the relay."""
    return target - left if left < low else 0


def _send(client: RelayClient, store: RatchetAccount, identity: Identity, make: int, fallback: bool) -> int:
    """Make `make` one-time keys (and a fallback key, if asked) unless unpublished ones already
    wait, publish everything unpublished with the card, and mark it published."""
    with store.changing() as account:
        if fallback and not fallback_keys(account):
            new_fallback_key(account)
        if make and not account.one_time_keys:  # another process's keys may wait unsent
            account.generate_one_time_keys(make)
        new_fallback, one_time = unpublished_keys(account, identity)
        card = card_for(account, identity)
    left = client.publish_ratchet(identity, Publication(card, new_fallback, one_time).to_json())
    if new_fallback or one_time:
        with store.changing() as account:
            account.mark_keys_as_published()
    return left


def publish_ratchet_keys(
    client: RelayClient, store: RatchetAccount, identity: Identity, *, new_fallback: bool = False
) -> int:
    """Bring the relay's copy of our ratchet keys up to date; how many one-time keys wait there.

    Raises:
        RelayError: unreachable, or a refusal (a relay without a key directory answers 404).
        UserError: the stored Olm account cannot be opened.
    """
    left = _send(client, store, identity, 0, new_fallback)
    more = top_up(left)
    return _send(client, store, identity, more, False) if more else left


def claim_ratchet_key(client: RelayClient, contact: Contact) -> Claim:
    """One of `contact`'s ratchet keys, checked against the signing key pinned for it.

    Raises:
        PinMismatch: the card or key is not signed by the pinned key.
        RelayError: unreachable, none published (404 not_found), or a malformed answer.
    """
    data = client.claim_ratchet(contact.fingerprint)
    return _pinned(contact, "nothing was sent",
                   lambda: verify_claim(data, contact.fingerprint, contact.sign_key))


def published_card(client: RelayClient, contact: Contact) -> RatchetCard:
    """`contact`'s ratchet card as the relay holds it now, checked against the pinned signing
    key; no one-time key is taken.

    Raises:
        PinMismatch: the card is not signed by the pinned key.
        RelayError: unreachable, none published or a relay without the route (404 not_found),
            or a malformed answer.
    """
    data = client.ratchet_card(contact.fingerprint).get("card")
    return _pinned(contact, "nothing was recorded",
                   lambda: verify_card(data, contact.fingerprint, contact.sign_key))


T = TypeVar("T")


def _pinned(contact: Contact, outcome: str, check: Callable[[], T]) -> T:
    """What `check` vouches for; a signature the pin did not make is a PIN MISMATCH (and then
    `outcome`), anything else malformed the relay's fault."""
    try:
        return check()
    except ForgedRatchetKey as exc:
        raise PinMismatch(
            f"PIN MISMATCH: the relay served ratchet keys for {contact.name} ({contact.fingerprint}) "
            f"that the pinned key did not sign ({exc}); {outcome}. Check the fingerprint with "
            "your peer over another channel and report the relay to its operator."
        ) from exc
    except RatchetKeyError as exc:
        raise RelayError(f"the relay served malformed ratchet keys for {contact.name}: {exc}") from exc
