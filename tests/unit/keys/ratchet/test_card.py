"""keys.ratchet.card: Olm keys bound to a talk fingerprint, and the attacks the binding stops."""

from __future__ import annotations

from typing import Any

import pytest

from keys.encoding import b64e, canonical_json
from keys.identity import Identity
from keys.ratchet.card import (
    CARD_CONTEXT,
    MAX_KEY_ID,
    KeyKind,
    Publication,
    RatchetKeyError,
    sign_card,
    sign_key,
    verify_card,
    verify_claim,
    verify_key,
    verify_publication,
)

CURVE, ED, OTK = b"\x01" * 32, b"\x02" * 32, b"\x03" * 32


def card_json(owner: Identity) -> dict[str, Any]:
    return sign_card(owner.fingerprint, CURVE, ED, owner.sign).to_json()


def key_json(owner: Identity, kind: KeyKind = KeyKind.ONE_TIME, key_id: int = 7) -> dict[str, Any]:
    return sign_key(kind, owner.fingerprint, key_id, OTK, owner.sign).to_json()


def test_a_card_round_trips(alice_id: Identity) -> None:
    card = verify_card(card_json(alice_id), alice_id.fingerprint, alice_id.sign_public)
    assert (card.curve25519, card.ed25519) == (CURVE, ED)
    assert card.to_json() == card_json(alice_id)


def test_a_card_signed_by_another_identity_is_refused(alice_id: Identity, bob_id: Identity) -> None:
    forged = sign_card(alice_id.fingerprint, CURVE, ED, bob_id.sign).to_json()
    with pytest.raises(RatchetKeyError, match=f"not signed by the identity {alice_id.fingerprint}"):
        verify_card(forged, alice_id.fingerprint, alice_id.sign_public)


def test_another_identitys_card_is_refused_for_this_one(alice_id: Identity, bob_id: Identity) -> None:
    """Bob's genuine card, served under Alice's fingerprint."""
    with pytest.raises(RatchetKeyError, match="names the identity"):
        verify_card(card_json(bob_id), alice_id.fingerprint, alice_id.sign_public)


@pytest.mark.parametrize("field", ["curve25519", "ed25519"])
def test_a_swapped_key_breaks_the_signature(alice_id: Identity, field: str) -> None:
    card = {**card_json(alice_id), field: b64e(b"\x09" * 32)}
    with pytest.raises(RatchetKeyError, match="not signed"):
        verify_card(card, alice_id.fingerprint, alice_id.sign_public)


def test_a_swapped_one_time_key_or_id_breaks_the_signature(alice_id: Identity) -> None:
    for changed in ({"key": b64e(b"\x09" * 32)}, {"id": 8}):
        with pytest.raises(RatchetKeyError, match="not signed"):
            verify_key(KeyKind.ONE_TIME, {**key_json(alice_id), **changed}, alice_id.fingerprint,
                       alice_id.sign_public)


def test_a_key_of_one_kind_does_not_pass_as_the_other(alice_id: Identity) -> None:
    fp, pub = alice_id.fingerprint, alice_id.sign_public
    with pytest.raises(RatchetKeyError, match="fallback key is not signed"):
        verify_key(KeyKind.FALLBACK, key_json(alice_id, KeyKind.ONE_TIME), fp, pub)
    with pytest.raises(RatchetKeyError, match="one-time key is not signed"):
        verify_key(KeyKind.ONE_TIME, key_json(alice_id, KeyKind.FALLBACK), fp, pub)


def test_a_key_signed_for_another_fingerprint_is_refused(alice_id: Identity, bob_id: Identity) -> None:
    """Alice's signature over a key named as Bob's: the signed body carries the fingerprint."""
    signed = sign_key(KeyKind.ONE_TIME, bob_id.fingerprint, 7, OTK, alice_id.sign).to_json()
    with pytest.raises(RatchetKeyError, match="not signed"):
        verify_key(KeyKind.ONE_TIME, signed, alice_id.fingerprint, alice_id.sign_public)


def test_a_signature_under_the_wrong_context_is_refused(alice_id: Identity) -> None:
    """A bundle-style signature (another context) over the card's own body."""
    genuine = card_json(alice_id)
    body = {k: v for k, v in genuine.items() if k != "sig"}
    assert b64e(alice_id.sign(CARD_CONTEXT + canonical_json(body))) == genuine["sig"]
    for context in (b"talk-bundle-v1\n", KeyKind.ONE_TIME.value, b""):
        wrong = {**genuine, "sig": b64e(alice_id.sign(context + canonical_json(body)))}
        with pytest.raises(RatchetKeyError, match="not signed"):
            verify_card(wrong, alice_id.fingerprint, alice_id.sign_public)


MALFORMED_CARDS: list[tuple[Any, str]] = [
    ("card", "JSON object"),
    ({"v": 2}, "JSON object"),
    ({"v": 1, "fp": "zz"}, "32 hex"),
    ({"v": 1, "fp": "a" * 32, "curve25519": "!!", "ed25519": "", "sig": ""}, "'curve25519' is not 32 bytes"),
    ({"v": 1, "fp": "a" * 32, "curve25519": b64e(b"1" * 31), "ed25519": "", "sig": ""}, "32 bytes"),
    ({"v": 1, "fp": "a" * 32, "curve25519": b64e(CURVE), "ed25519": 5, "sig": ""}, "'ed25519'"),
    ({"v": 1, "fp": "a" * 32, "curve25519": b64e(CURVE), "ed25519": b64e(ED), "sig": b64e(b"s" * 63)},
     "'sig' is not 64 bytes"),
]


@pytest.mark.parametrize(("data", "says"), MALFORMED_CARDS)
def test_a_malformed_card_is_one_clear_error(data: Any, says: str) -> None:
    with pytest.raises(RatchetKeyError, match=says):
        verify_card(data, "a" * 32, b"\x00" * 32)


@pytest.mark.parametrize(("data", "says"), [
    ([], "JSON object"),
    ({"id": -1}, "'id' must be an integer"),
    ({"id": True}, "'id' must be an integer"),
    ({"id": "7"}, "'id' must be an integer"),
    ({"id": MAX_KEY_ID + 1}, "'id' must be an integer"),
    ({"id": 1, "key": None}, "'key' is not 32 bytes"),
    ({"id": 1, "key": b64e(OTK) + "=", "sig": ""}, "'key' is not 32 bytes"),
    ({"id": 1, "key": b64e(OTK), "sig": "é"}, "'sig' is not 64 bytes"),
])
def test_a_malformed_key_is_one_clear_error(data: Any, says: str) -> None:
    with pytest.raises(RatchetKeyError, match=says):
        verify_key(KeyKind.ONE_TIME, data, "a" * 32, b"\x00" * 32)


def test_a_sign_key_that_is_no_key_is_a_refusal_not_a_crash(alice_id: Identity) -> None:
    with pytest.raises(RatchetKeyError, match="not signed"):
        verify_card(card_json(alice_id), alice_id.fingerprint, b"\x00" * 31)


def test_a_publication_is_checked_part_by_part(alice_id: Identity, bob_id: Identity) -> None:
    fp, pub = alice_id.fingerprint, alice_id.sign_public
    good = Publication(sign_card(fp, CURVE, ED, alice_id.sign),
                       sign_key(KeyKind.FALLBACK, fp, 0, OTK, alice_id.sign),
                       [sign_key(KeyKind.ONE_TIME, fp, i, OTK, alice_id.sign) for i in range(3)])
    assert verify_publication(good.to_json(), fp, pub, 3) == good
    assert verify_publication({"card": good.card.to_json()}, fp, pub, 3) == (good.card, None, [])
    with pytest.raises(RatchetKeyError, match="at most 2 keys"):
        verify_publication(good.to_json(), fp, pub, 2)
    forged = {**good.to_json(), "one_time": [key_json(bob_id)]}
    with pytest.raises(RatchetKeyError, match="one-time key is not signed"):
        verify_publication(forged, fp, pub, 3)
    with pytest.raises(RatchetKeyError, match="expected a JSON object"):
        verify_publication([good.to_json()], fp, pub, 3)


def test_a_claim_is_checked_against_the_pinned_key(alice_id: Identity, bob_id: Identity) -> None:
    fp = alice_id.fingerprint
    answer = {"card": card_json(alice_id), "key": key_json(alice_id), "kind": "one_time"}
    claim = verify_claim(answer, fp, alice_id.sign_public)
    assert claim.key.kind is KeyKind.ONE_TIME and claim.key.key_id == 7
    with pytest.raises(RatchetKeyError, match="fallback key is not signed"):
        verify_claim({**answer, "kind": "fallback"}, fp, alice_id.sign_public)
    with pytest.raises(RatchetKeyError, match="'kind' is one_time or fallback"):
        verify_claim({**answer, "kind": "other"}, fp, alice_id.sign_public)
    with pytest.raises(RatchetKeyError, match="not signed"):  # a relay serving its own keys
        verify_claim(answer, fp, bob_id.sign_public)
