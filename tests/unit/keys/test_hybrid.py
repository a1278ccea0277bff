"""keys.hybrid and the hybrid envelope: opens only with both the X25519 and the ML-KEM secret,
refuses every changed byte as tampered, and is told from the classic one by its length alone."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from durable.errors import TamperedMessage
from keys.envelope import (
    BUCKETS,
    CLASSIC_LENGTHS,
    HYBRID_LENGTHS,
    MAX_BLOB,
    MAX_PADDED,
    OVERHEAD,
    new_message,
    open_blob,
    seal,
)
from keys.hybrid import KEM_CIPHERTEXT, kem_public_key, new_kem_seed, open_outer, seal_outer
from keys.identity import Identity
from keys.sodium import PrivateKey


def hybrid_to(sender: Identity, recipient: Identity, text: str = "post-quantum hello") -> bytes:
    assert recipient.kem_seed is not None
    inner = new_message(sender.fingerprint, recipient.fingerprint, text)
    return seal(inner, sender.box_secret, recipient.box_secret.public_key, kem_public_key(recipient.kem_seed))


def open_as(recipient: Identity, blob: bytes, sender: Identity, kem: bytes | None) -> str:
    def pinned(key: bytes) -> list[str]:
        return [sender.fingerprint] if key == sender.box_public else []

    return open_blob(blob, recipient.box_secret, recipient.fingerprint, pinned, lambda fp: fp, kem)[1].text


def test_a_hybrid_envelope_opens_for_its_recipient_and_has_a_hybrid_length(
        alice_id: Identity, bob_id: Identity) -> None:
    blob = hybrid_to(alice_id, bob_id)
    assert len(blob) in HYBRID_LENGTHS and len(blob) not in CLASSIC_LENGTHS
    assert open_as(bob_id, blob, alice_id, bob_id.kem_seed) == "post-quantum hello"


def test_classic_and_hybrid_lengths_never_meet_and_the_largest_fits_the_relay() -> None:
    assert {b + OVERHEAD for b in BUCKETS} == CLASSIC_LENGTHS
    assert not CLASSIC_LENGTHS & HYBRID_LENGTHS
    assert len(HYBRID_LENGTHS) == len(BUCKETS)
    assert max(HYBRID_LENGTHS) == MAX_BLOB > max(CLASSIC_LENGTHS)


def test_the_largest_hybrid_message_is_max_blob(alice_id: Identity, bob_id: Identity) -> None:
    for text in ("x" * n for n in range(MAX_PADDED - 400, MAX_PADDED)):
        try:
            blob = hybrid_to(alice_id, bob_id, text)
        except Exception:  # over the limit once framed: the one before was the largest
            break
        biggest = blob
    assert len(biggest) == MAX_BLOB


def test_a_recorded_envelope_does_not_open_with_the_x25519_secret_alone(
        alice_id: Identity, bob_id: Identity) -> None:
    """An attacker who broke X25519 holds bob's box secret; without his ML-KEM secret (here: any
    other, or none) the recording stays shut."""
    blob = hybrid_to(alice_id, bob_id)
    for guess in (new_kem_seed(), bytes(64), None):
        with pytest.raises(TamperedMessage):
            open_as(bob_id, blob, alice_id, guess)


def test_a_recorded_envelope_does_not_open_with_the_ml_kem_secret_alone(
        alice_id: Identity, bob_id: Identity, carol_id: Identity) -> None:
    """An attacker who broke ML-KEM holds bob's KEM seed; without his X25519 secret it opens nothing."""
    blob = hybrid_to(alice_id, bob_id)
    assert bob_id.kem_seed is not None
    for box in (carol_id.box_secret, PrivateKey.generate()):
        with pytest.raises(TamperedMessage):
            open_outer(blob, box, bob_id.kem_seed)


@pytest.mark.parametrize("where", [0, 17, 31,  # the ephemeral X25519 key
                                   32, 600, 32 + KEM_CIPHERTEXT - 1,  # the ML-KEM ciphertext
                                   32 + KEM_CIPHERTEXT, 32 + KEM_CIPHERTEXT + 30,  # nonce, body
                                   -17, -1])  # body, MAC
def test_any_changed_byte_is_tampered_never_a_crash(alice_id: Identity, bob_id: Identity,
                                                    where: int) -> None:
    blob = bytearray(hybrid_to(alice_id, bob_id))
    blob[where] ^= 0x01
    with pytest.raises(TamperedMessage):
        open_as(bob_id, bytes(blob), alice_id, bob_id.kem_seed)


@pytest.mark.parametrize("point", [bytes(32), (1).to_bytes(32, "little"), b"\xff" * 32])
def test_a_degenerate_ephemeral_key_is_tampered(alice_id: Identity, bob_id: Identity, point: bytes) -> None:
    blob = point + hybrid_to(alice_id, bob_id)[32:]
    with pytest.raises(TamperedMessage):
        open_as(bob_id, blob, alice_id, bob_id.kem_seed)


def test_the_ciphertext_and_ephemeral_key_of_another_envelope_do_not_fit(
        alice_id: Identity, bob_id: Identity) -> None:
    """Every public part is bound into the key: a splice of two valid envelopes is refused."""
    one, two = hybrid_to(alice_id, bob_id, "one"), hybrid_to(alice_id, bob_id, "two")
    cut = 32 + KEM_CIPHERTEXT
    for spliced in (two[:32] + one[32:], one[:32] + two[32:cut] + one[cut:], two[:cut] + one[cut:]):
        with pytest.raises(TamperedMessage):
            open_as(bob_id, spliced, alice_id, bob_id.kem_seed)


def test_a_classic_envelope_still_opens_for_a_recipient_with_a_kem_key(
        alice_id: Identity, bob_id: Identity) -> None:
    """A contact on an older talk (no KEM key pinned either way) seals classic: it still opens."""
    inner = new_message(alice_id.fingerprint, bob_id.fingerprint, "classic")
    blob = seal(inner, alice_id.box_secret, bob_id.box_secret.public_key)
    assert len(blob) in CLASSIC_LENGTHS
    assert open_as(bob_id, blob, alice_id, bob_id.kem_seed) == "classic"


def test_seal_outer_round_trips_any_payload() -> None:
    box, seed = PrivateKey.generate(), new_kem_seed()
    for payload in (b"", b"x", bytes(range(256)) * 9):
        blob = seal_outer(payload, bytes(box.public_key), kem_public_key(seed))
        assert open_outer(blob, box, seed) == payload


LENGTHS = st.one_of(st.integers(0, 4000), st.sampled_from(sorted(HYBRID_LENGTHS | CLASSIC_LENGTHS)),
                    st.integers(0, MAX_BLOB + 8))


@settings(max_examples=150, deadline=None)
@given(length=LENGTHS, seed=st.integers(0, 2**32))
def test_random_bytes_of_any_length_are_only_ever_tampered(
        alice_id: Identity, bob_id: Identity, length: int, seed: int) -> None:
    blob = random.Random(seed).randbytes(length)
    with pytest.raises(TamperedMessage):
        open_as(bob_id, blob, alice_id, bob_id.kem_seed)
