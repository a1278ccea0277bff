"""keys.contacts: the contact book pins each key once and keeps names apart."""

from __future__ import annotations

from pathlib import Path

import pytest

from durable.errors import (
    KeyInUse,
    UserError,
)
from keys.contacts import ContactBook, Source, free_name, pinned_contact
from keys.identity import Identity, KeyBundle
from tests.peer_forge import borrowed_box_bundle


def test_contact_book_pins_once_and_keeps_names_apart(
    tmp_path: Path, alice_id: Identity, bob_id: Identity
) -> None:
    book = ContactBook(tmp_path)
    pinned = book.pin(pinned_contact("bob", bob_id.bundle(), Source.ADDED))
    assert book.get("bob") == pinned == book.get(bob_id.fingerprint)
    assert book.with_box_key(bob_id.box_public) == [pinned]
    # Re-pinning the same keys under another name returns the stored contact unchanged.
    assert book.pin(pinned_contact("robert", bob_id.bundle(), Source.JOINED)) == pinned
    with pytest.raises(UserError, match="already used"):
        book.pin(pinned_contact("bob", alice_id.bundle(), Source.ADDED))
    assert free_name("bob", {"bob", "bob-2"}) == "bob-3"
    assert [c.name for c in book.all()] == ["bob"]


@pytest.mark.parametrize("source", list(Source))
def test_contact_book_refuses_a_key_pinned_to_another_contact(
    tmp_path: Path, alice_id: Identity, bob_id: Identity, carol_id: Identity, source: Source
) -> None:
    book = ContactBook(tmp_path)
    book.pin(pinned_contact("bob", bob_id.bundle(), Source.INVITED))
    before = (tmp_path / "contacts.json").read_bytes()
    borrowed_box = borrowed_box_bundle(carol_id, bob_id)
    clash = r"box key is already pinned to your contact 'bob' \(" + bob_id.fingerprint
    with pytest.raises(KeyInUse, match=clash):
        book.pin(pinned_contact("carol", borrowed_box, source))
    with pytest.raises(KeyInUse, match="refused to join " + borrowed_box.fingerprint):
        book.check_free(borrowed_box, "to join")
    borrowed_sign = KeyBundle("bob2", bob_id.sign_public, carol_id.box_public, b"\0" * 64)
    with pytest.raises(KeyInUse, match="sign key is already pinned to your contact 'bob'"):
        book.pin(pinned_contact("bob2", borrowed_sign, source))
    assert (tmp_path / "contacts.json").read_bytes() == before
    book.check_free(bob_id.bundle())  # the same keys again are not a clash
    book.check_free(alice_id.bundle())


