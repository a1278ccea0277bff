"""keys.kem_card and the pins it feeds: a KEM key is pinned only when the signing key pinned for
its identity signed it for that identity; anything else leaves the contact "post-quantum: no"."""

from __future__ import annotations

from pathlib import Path

import pytest

from keys.contacts import ContactBook, Source, pinned_contact
from keys.hybrid import kem_public_key, new_kem_seed
from keys.identity import Identity, KeyBundle
from keys.kem_card import KemCard, sign_kem_card


def with_card(bundle: KeyBundle, card: KemCard | None) -> KeyBundle:
    return bundle._replace(kem=card)


def forged_cards(bob: Identity, carol: Identity) -> dict[str, KemCard]:
    assert bob.kem_seed is not None
    key = kem_public_key(bob.kem_seed)
    good = sign_kem_card(bob.fingerprint, key, bob.sign)
    return {
        "bad signature": good._replace(signature=bytes(64)),
        "another key under bob's signature": good._replace(key=kem_public_key(new_kem_seed())),
        "signed by carol for bob": sign_kem_card(bob.fingerprint, key, carol.sign),
        "bob's signature over carol's fingerprint": sign_kem_card(carol.fingerprint, key, bob.sign),
        "not a KEM key": sign_kem_card(bob.fingerprint, b"\xff" * len(key), bob.sign),
    }


def test_a_bundle_carries_its_kem_key_signed_and_pins_it(tmp_path: Path, bob_id: Identity) -> None:
    bundle = KeyBundle.from_json(bob_id.bundle().to_json())
    assert bob_id.kem_seed is not None and bundle.kem_key() == kem_public_key(bob_id.kem_seed)
    contact = ContactBook(tmp_path).pin(pinned_contact("bob", bundle, Source.ADDED))
    assert contact.post_quantum and contact.kem_key == bundle.kem_key()
    assert ContactBook(tmp_path).get("bob").kem_key == contact.kem_key


@pytest.mark.parametrize("how", ["bad signature", "another key under bob's signature",
                                 "signed by carol for bob", "bob's signature over carol's fingerprint",
                                 "not a KEM key"])
def test_a_forged_kem_key_is_refused_and_never_pinned(
        tmp_path: Path, bob_id: Identity, carol_id: Identity, how: str) -> None:
    card = forged_cards(bob_id, carol_id)[how]
    forged = with_card(bob_id.bundle(), card)
    assert forged.self_signed() and forged.kem_key() is None
    assert not pinned_contact("bob", forged, Source.ADDED).post_quantum
    # A contact pinned before, refreshed from a relay serving the forgery: still no KEM key.
    book = ContactBook(tmp_path)
    book.pin(pinned_contact("bob", with_card(bob_id.bundle(), None), Source.ADDED))
    after = book.pin_kem(bob_id.fingerprint, forged, 1000.0)
    assert after.kem_key is None and after.kem_checked_at == 1000.0
    assert book.get("bob").kem_key is None


def test_an_upgrade_pins_through_the_pinned_signing_key_once_and_never_replaces_it(
        tmp_path: Path, bob_id: Identity, carol_id: Identity) -> None:
    book = ContactBook(tmp_path)
    old = book.pin(pinned_contact("bob", with_card(bob_id.bundle(), None), Source.ADDED))
    assert not old.post_quantum
    assert book.pin_kem(bob_id.fingerprint, None, 5.0).kem_key is None  # the relay withheld it
    upgraded = book.pin_kem(bob_id.fingerprint, bob_id.bundle(), 10.0)
    assert upgraded.post_quantum and upgraded.kem_pinned_at == 10.0
    # Carol's keys, correctly signed by carol, offered as bob's: bob's pin stays.
    carols = bob_id.bundle()._replace(kem=carol_id.bundle().kem)
    assert book.pin_kem(bob_id.fingerprint, carols, 20.0) == upgraded
    assert book.get("bob").kem_key == upgraded.kem_key
