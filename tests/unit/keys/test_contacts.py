"""keys.contacts: the contact book pins each key once and keeps names apart."""

from __future__ import annotations

from pathlib import Path

import pytest

from durable.errors import (
    KeyInUse,
    UserError,
)
from keys.contacts import ContactBook, Source, free_name, peer_name, pinned_contact
from keys.identity import Identity, KeyBundle
from keys.names import MAX_NAME, check_name
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




FP = "0123ab" + "c" * 26  # its first six characters hold digits and Latin letters, as any may


@pytest.mark.parametrize("length", range(1, MAX_NAME + 1))
@pytest.mark.parametrize("letter", ["a", "\u0431", "\u4e2d", "7"])  # Latin, Cyrillic, CJK, digits
def test_a_joiner_named_exactly_like_a_contact_gets_a_name_that_obeys_the_rule(
    length: int, letter: str
) -> None:
    wanted = letter * length
    taken = {wanted, "bob", f"peer-{FP[:8]}"}
    name = peer_name(wanted, FP, taken)
    assert check_name(name) == name and name not in taken
    if letter in "a7":  # the prefix's hex letters are Latin: only such a name can take them
        assert name == wanted[:MAX_NAME - 7] + "-" + FP[:6]
    else:
        assert name == f"peer-{FP[:8]}-2"
    # Taken again by a second joiner of the same name and fingerprint prefix: still a valid, free name.
    again = peer_name(wanted, FP, taken | {name})
    assert check_name(again) == again and again not in taken | {name}


def test_a_joiners_own_name_is_kept_when_free() -> None:
    assert peer_name("carol", FP, {"bob"}) == "carol"
    assert peer_name("b\u043eb", FP, {"bob"}) == f"peer-{FP[:8]}"  # a look-alike of a contact
