"""The ratchet card: an identity's Olm keys, bound to its talk fingerprint by its signing key.

A peer who pinned a fingerprint checks the key bundle against it (`keys.identity`); the
bundle's Ed25519 key, which the fingerprint covers, then vouches for the Olm account's two
identity keys (the card), for each one-time key and for the fallback key. So a relay can hand
out ratchet keys but not substitute them, exactly as with bundles.

Each kind is signed under a context of its own, and every signed body names the owner's
fingerprint: no signature can be replayed as another kind, or as another identity's.

Wire forms (standard base64, as everywhere in talk):

    card  {"v": 1, "fp": HEX32, "curve25519": B64(32), "ed25519": B64(32), "sig": B64(64)}
    key   {"id": INT, "key": B64(32), "sig": B64(64)}   one-time or fallback, by its context

    publication  {"card": card, "fallback": key?, "one_time": [key, ...]}   owner → relay
    claim        {"card": card, "key": key, "kind": "one_time" | "fallback"}  relay → peer

Signed bytes: the kind's context, then `canonical_json` of the object without "sig" (a key's
object with the owner's "fp" added). `id` is the Olm account's key id, a counter that only
grows, so the relay can tell a key it already had (or gave away) from a new one.
"""

from __future__ import annotations

from collections.abc import Callable
from enum import Enum
from typing import Any, NamedTuple

from nacl.exceptions import BadSignatureError

from keys.encoding import b64d, b64e, canonical_json, is_hex32
from keys.sodium import VerifyKey

__all__ = [
    "CARD_CONTEXT",
    "MAX_KEY_ID",
    "Claim",
    "ForgedRatchetKey",
    "KeyKind",
    "Publication",
    "RatchetCard",
    "RatchetKeyError",
    "SignedKey",
    "sign_card",
    "sign_key",
    "verify_card",
    "verify_claim",
    "verify_key",
    "verify_publication",
]

CARD_CONTEXT = b"talk-ratchet-card-v1\n"
MAX_KEY_ID = 2**53 - 1  # ids travel as JSON numbers; above this a double cannot hold them exactly
Sign = Callable[[bytes], bytes]


class RatchetKeyError(ValueError):
    """A card or key that is malformed, or not signed by the identity it claims."""


class ForgedRatchetKey(RatchetKeyError):
    """Well formed, but not the named identity's: signed by another key, or for another identity."""


class KeyKind(Enum):
    """What a signed Curve25519 key is for; the value is its signature context."""

    ONE_TIME = b"talk-ratchet-one-time-key-v1\n"
    FALLBACK = b"talk-ratchet-fallback-key-v1\n"


class RatchetCard(NamedTuple):
    fp: str
    curve25519: bytes
    ed25519: bytes
    signature: bytes

    def to_json(self) -> dict[str, Any]:
        return {**_card_body(self.fp, self.curve25519, self.ed25519), "sig": b64e(self.signature)}


class SignedKey(NamedTuple):
    kind: KeyKind
    key_id: int
    key: bytes
    signature: bytes

    def to_json(self) -> dict[str, Any]:
        return {"id": self.key_id, "key": b64e(self.key), "sig": b64e(self.signature)}


def _card_body(fp: str, curve25519: bytes, ed25519: bytes) -> dict[str, Any]:
    return {"v": 1, "fp": fp, "curve25519": b64e(curve25519), "ed25519": b64e(ed25519)}


def _key_body(fp: str, key_id: int, key: bytes) -> dict[str, Any]:
    return {"fp": fp, "id": key_id, "key": b64e(key)}


def sign_card(fp: str, curve25519: bytes, ed25519: bytes, sign: Sign) -> RatchetCard:
    """The card for an Olm account's identity keys, signed with the talk signing key (`sign`)."""
    signature = sign(CARD_CONTEXT + canonical_json(_card_body(fp, curve25519, ed25519)))
    return RatchetCard(fp, curve25519, ed25519, signature)


def sign_key(kind: KeyKind, fp: str, key_id: int, key: bytes, sign: Sign) -> SignedKey:
    signature = sign(kind.value + canonical_json(_key_body(fp, key_id, key)))
    return SignedKey(kind, key_id, key, signature)


def _field(data: dict[str, Any], name: str, length: int, what: str) -> bytes:
    try:
        return b64d(data.get(name), length)  # type: ignore[arg-type]
    except ValueError as exc:
        raise RatchetKeyError(f"{what}: '{name}' is not {length} bytes of base64 ({exc})") from None


def _check_signature(sign_key: bytes, message: bytes, signature: bytes, what: str, fp: str) -> None:
    try:
        VerifyKey(sign_key).verify(message, signature)
    except (BadSignatureError, ValueError):
        raise ForgedRatchetKey(f"{what} is not signed by the identity {fp}") from None


def verify_card(data: Any, fp: str, owner_sign_key: bytes) -> RatchetCard:
    """The card in `data`, once it names `fp` and `owner_sign_key` (the key `fp` covers) signed it.

    Raises:
        RatchetKeyError: malformed, another identity's card, or a bad signature.
    """
    if not isinstance(data, dict) or data.get("v") != 1:
        raise RatchetKeyError("ratchet card: expected a JSON object with \"v\": 1")
    if not is_hex32(data.get("fp")):
        raise RatchetKeyError("ratchet card: 'fp' is not a fingerprint of 32 hex characters")
    if data["fp"] != fp:
        raise ForgedRatchetKey(f"ratchet card names the identity {data['fp']}, not {fp}")
    card = RatchetCard(fp, _field(data, "curve25519", 32, "ratchet card"),
                       _field(data, "ed25519", 32, "ratchet card"), _field(data, "sig", 64, "ratchet card"))
    body = CARD_CONTEXT + canonical_json(_card_body(fp, card.curve25519, card.ed25519))
    _check_signature(owner_sign_key, body, card.signature, "ratchet card", fp)
    return card


def verify_key(kind: KeyKind, data: Any, fp: str, owner_sign_key: bytes) -> SignedKey:
    """The `kind` key in `data`, once `owner_sign_key` signed it as `fp`'s key of that kind.

    Raises:
        RatchetKeyError: malformed, a bad id, another kind's or identity's key, or a bad signature.
    """
    what = f"ratchet {kind.name.lower().replace('_', '-')} key"
    if not isinstance(data, dict):
        raise RatchetKeyError(f"{what}: expected a JSON object")
    key_id = data.get("id")
    if isinstance(key_id, bool) or not isinstance(key_id, int) or not 0 <= key_id <= MAX_KEY_ID:
        raise RatchetKeyError(f"{what}: 'id' must be an integer from 0 to {MAX_KEY_ID}")
    signed = SignedKey(kind, key_id, _field(data, "key", 32, what), _field(data, "sig", 64, what))
    body = kind.value + canonical_json(_key_body(fp, key_id, signed.key))
    _check_signature(owner_sign_key, body, signed.signature, what, fp)
    return signed


class Publication(NamedTuple):
    card: RatchetCard
    fallback: SignedKey | None
    one_time: list[SignedKey]

    def to_json(self) -> dict[str, Any]:
        body: dict[str, Any] = {"card": self.card.to_json(), "one_time": [k.to_json() for k in self.one_time]}
        if self.fallback is not None:
            body["fallback"] = self.fallback.to_json()
        return body


class Claim(NamedTuple):
    card: RatchetCard
    key: SignedKey


def verify_publication(data: Any, fp: str, owner_sign_key: bytes, most: int) -> Publication:
    """What an owner publishes, every part checked, at most `most` one-time keys.

    Raises:
        RatchetKeyError: as `verify_card` and `verify_key`, or a malformed list.
    """
    if not isinstance(data, dict):
        raise RatchetKeyError("ratchet publication: expected a JSON object")
    one_time = data.get("one_time", [])
    if not isinstance(one_time, list) or len(one_time) > most:
        raise RatchetKeyError(f"ratchet publication: 'one_time' must be a list of at most {most} keys")
    fallback = data.get("fallback")
    return Publication(
        verify_card(data.get("card"), fp, owner_sign_key),
        None if fallback is None else verify_key(KeyKind.FALLBACK, fallback, fp, owner_sign_key),
        [verify_key(KeyKind.ONE_TIME, key, fp, owner_sign_key) for key in one_time],
    )


def verify_claim(data: Any, fp: str, owner_sign_key: bytes) -> Claim:
    """A relay's answer to a claim of `fp`'s keys, checked against the key `fp` covers.

    Raises:
        RatchetKeyError: as `verify_card` and `verify_key`, or an unknown kind.
    """
    kinds = {"one_time": KeyKind.ONE_TIME, "fallback": KeyKind.FALLBACK}
    if not isinstance(data, dict) or data.get("kind") not in kinds:
        raise RatchetKeyError("ratchet claim: expected a JSON object whose 'kind' is one_time or fallback")
    card = verify_card(data.get("card"), fp, owner_sign_key)
    return Claim(card, verify_key(kinds[data["kind"]], data.get("key"), fp, owner_sign_key))
