"""keys.envelope: the sealed envelope opens only for its recipient, from a pinned sender, untampered."""

from __future__ import annotations

import json

import pytest

from durable.errors import (
    MessageTooLarge,
    TamperedMessage,
    UnknownSender,
)
from keys.encoding import HEX32
from keys.envelope import (
    BUCKETS,
    MAX_PADDED,
    OVERHEAD,
    Inner,
    channel_tag,
    new_message,
    open_blob,
    seal,
)
from keys.identity import Identity
from tests.peer_forge import borrowed_box_bundle


def contacts_of(*peers: Identity) -> dict[bytes, list[str]]:
    """What a pinned contact book answers: box key → the fingerprints pinned with it."""
    pinned: dict[bytes, list[str]] = {}
    for p in peers:
        pinned.setdefault(p.box_public, []).append(p.fingerprint)
    return pinned


def open_as(
    recipient: Identity, blob: bytes, pinned: dict[bytes, list[str]], own_fp: str | None = None
) -> tuple[str, Inner]:
    return open_blob(
        blob, recipient.box_secret, own_fp or recipient.fingerprint,
        lambda key: pinned.get(key, []), lambda fp: fp,
    )


def sealed_text(sender: Identity, recipient: Identity, text: str) -> bytes:
    inner = new_message(sender.fingerprint, recipient.fingerprint, text)
    return seal(inner, sender.box_secret, recipient.box_secret.public_key)


def test_seal_open_round_trip(alice_id: Identity, bob_id: Identity) -> None:
    inner = new_message(alice_id.fingerprint, bob_id.fingerprint, "héllo bob ✓", kind="chat", thread="t1")
    blob = seal(inner, alice_id.box_secret, bob_id.box_secret.public_key)
    assert "héllo".encode() not in blob
    sender, opened = open_as(bob_id, blob, contacts_of(alice_id))
    assert sender == alice_id.fingerprint
    # The gate passes on only the fields it knows: "thread" is dropped, never handed on.
    assert opened == inner._replace(extra={})


def test_open_with_the_wrong_recipient_key_is_tampered(
    alice_id: Identity, bob_id: Identity, carol_id: Identity
) -> None:
    blob = sealed_text(alice_id, bob_id, "for bob only")
    with pytest.raises(TamperedMessage):
        open_as(carol_id, blob, contacts_of(alice_id))


@pytest.mark.parametrize("where", [0, 31, 40, 100, -17, -1])
def test_one_flipped_byte_is_tampered(alice_id: Identity, bob_id: Identity, where: int) -> None:
    blob = bytearray(sealed_text(alice_id, bob_id, "integrity"))
    blob[where] ^= 0x01
    with pytest.raises(TamperedMessage):
        open_as(bob_id, bytes(blob), contacts_of(alice_id))


def test_truncated_blob_is_tampered(alice_id: Identity, bob_id: Identity) -> None:
    blob = sealed_text(alice_id, bob_id, "cut short")
    for cut in (blob[:-1], blob[:40], b""):
        with pytest.raises(TamperedMessage):
            open_as(bob_id, cut, contacts_of(alice_id))


def test_sender_not_pinned_is_unknown(alice_id: Identity, bob_id: Identity, carol_id: Identity) -> None:
    blob = sealed_text(alice_id, bob_id, "who am I")
    with pytest.raises(UnknownSender):
        open_as(bob_id, blob, contacts_of(carol_id))


def test_inner_recipient_not_ours_is_tampered(
    alice_id: Identity, bob_id: Identity, carol_id: Identity
) -> None:
    # Sealed to bob's key, but the signed-in-the-box header says it is for carol: a forward.
    inner = new_message(alice_id.fingerprint, carol_id.fingerprint, "meant for carol")
    blob = seal(inner, alice_id.box_secret, bob_id.box_secret.public_key)
    with pytest.raises(TamperedMessage, match="wrong sender or recipient"):
        open_as(bob_id, blob, contacts_of(alice_id))


def test_inner_sender_not_the_sealing_key_is_tampered(
    alice_id: Identity, bob_id: Identity, carol_id: Identity
) -> None:
    # alice seals with her own key but claims to be carol, whom bob also pins.
    inner = new_message(carol_id.fingerprint, bob_id.fingerprint, "I am carol, honest")
    blob = seal(inner, alice_id.box_secret, bob_id.box_secret.public_key)
    with pytest.raises(TamperedMessage):
        open_as(bob_id, blob, contacts_of(alice_id, carol_id))


def test_mail_goes_to_the_contact_its_sealed_sender_names(
    alice_id: Identity, bob_id: Identity, carol_id: Identity
) -> None:
    """Two pins share bob's box key (a book from before `pin` refused that): bob's mail is
    bob's whichever pin comes first, and the pin's maker cannot write as it."""
    impostor = borrowed_box_bundle(carol_id, bob_id).fingerprint
    pinned = {bob_id.box_public: [impostor, bob_id.fingerprint]}
    assert open_as(alice_id, sealed_text(bob_id, alice_id, "from bob"), pinned)[0] == bob_id.fingerprint
    reordered = {bob_id.box_public: [bob_id.fingerprint, impostor]}
    assert open_as(alice_id, sealed_text(bob_id, alice_id, "again"), reordered)[0] == bob_id.fingerprint
    from_carol = seal(new_message(impostor, alice_id.fingerprint, "hi"), carol_id.box_secret,
                      alice_id.box_secret.public_key)
    with pytest.raises(UnknownSender):
        open_as(alice_id, from_carol, pinned)


def framing(sender: Identity, recipient: Identity) -> int:
    """Bytes of inner JSON around the text (ids, time, kind): about 180."""
    empty = new_message(sender.fingerprint, recipient.fingerprint, "").to_json()
    return len(json.dumps(empty, ensure_ascii=False, separators=(",", ":")))


def test_padding_hides_length_within_a_bucket(alice_id: Identity, bob_id: Identity) -> None:
    room = BUCKETS[0] - 1 - framing(alice_id, bob_id)  # the longest text the first bucket holds
    assert 300 <= room < 400
    sizes = {len(sealed_text(alice_id, bob_id, "x" * n)) for n in (1, 100, room)}
    assert sizes == {BUCKETS[0] + OVERHEAD}
    # One byte more moves to the next bucket, where 400 and 1000 characters look the same.
    second = BUCKETS[1] + OVERHEAD
    assert len(sealed_text(alice_id, bob_id, "x" * (room + 1))) == second
    assert len(sealed_text(alice_id, bob_id, "y" * 400)) == len(sealed_text(alice_id, bob_id, "z" * 1000))
    assert len(sealed_text(alice_id, bob_id, "y" * 400)) == second


def test_largest_message_fills_the_relay_blob_limit(alice_id: Identity, bob_id: Identity) -> None:
    text = "a" * (MAX_PADDED - 1 - framing(alice_id, bob_id))
    biggest = sealed_text(alice_id, bob_id, text)
    assert len(biggest) == MAX_PADDED + OVERHEAD  # a hybrid envelope adds to it up to MAX_BLOB
    assert open_as(bob_id, biggest, contacts_of(alice_id))[1].text == text
    with pytest.raises(MessageTooLarge):
        sealed_text(alice_id, bob_id, text + "a")


def test_text_over_the_limit_is_too_large(alice_id: Identity, bob_id: Identity) -> None:
    with pytest.raises(MessageTooLarge, match="limit"):
        sealed_text(alice_id, bob_id, "a" * MAX_PADDED)


def test_channel_tag_is_shared_by_both_ends_and_differs_by_direction(
    alice_id: Identity, bob_id: Identity, carol_id: Identity
) -> None:
    to_bob_by_alice = channel_tag(alice_id.box_secret, bob_id.box_secret.public_key, bob_id.fingerprint)
    to_bob_by_bob = channel_tag(bob_id.box_secret, alice_id.box_secret.public_key, bob_id.fingerprint)
    assert to_bob_by_alice == to_bob_by_bob
    assert HEX32.match(to_bob_by_alice)
    to_alice = channel_tag(bob_id.box_secret, alice_id.box_secret.public_key, alice_id.fingerprint)
    assert to_alice == channel_tag(alice_id.box_secret, bob_id.box_secret.public_key, alice_id.fingerprint)
    assert to_alice != to_bob_by_alice
    # Another pair's channel to the same recipient has its own tag.
    assert channel_tag(carol_id.box_secret, bob_id.box_secret.public_key, bob_id.fingerprint) not in {
        to_bob_by_alice, to_alice
    }




def test_content_nested_past_the_limit_is_refused_and_names_its_one_possible_writer(
    alice_id: Identity, bob_id: Identity
) -> None:
    from durable.errors import MalformedMessage
    from keys.contacts import Source, pinned_contact
    from tests.peer_forge import seal_raw

    to_bob = pinned_contact("bob", bob_id.bundle(), Source.ADDED)
    blob = seal_raw(alice_id, to_bob, b"[" * 20_000 + b"]" * 20_000)
    with pytest.raises(MalformedMessage, match="deeper than") as refused:
        open_as(bob_id, blob, contacts_of(alice_id))
    assert refused.value.sender == alice_id.fingerprint and refused.value.msg_id is None
