"""The KEM card: an identity's ML-KEM-768 public key, vouched for by its signing key.

The fingerprint covers the signing and box keys only (it predates the KEM key, and addresses
must not change), so the KEM key is bound to it the way ratchet cards are (`keys.ratchet.card`):
the signing key the fingerprint covers signs it, under a context of its own, in a body that
names the owner's fingerprint. A relay can withhold the card (the contact then stays
"post-quantum: no") but cannot make one, nor pass one identity's off as another's.

Wire form, the "kem" field of a key bundle (standard base64):

    {"alg": "ML-KEM-768", "key": B64(1184), "sig": B64(64)}

Signed bytes: KEM_CONTEXT, then `canonical_json({"alg", "fp", "key"})`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

from nacl.exceptions import BadSignatureError

from keys.encoding import b64d, b64e, canonical_json
from keys.hybrid import KEM_PUBLIC, usable_kem_key
from keys.sodium import VerifyKey

__all__ = ["ALG", "KEM_CONTEXT", "KemCard", "sign_kem_card"]

KEM_CONTEXT = b"talk-kem-key-v1\n"
ALG = "ML-KEM-768"


def _body(fp: str, key: bytes) -> bytes:
    return KEM_CONTEXT + canonical_json({"alg": ALG, "fp": fp, "key": b64e(key)})


class KemCard(NamedTuple):
    key: bytes
    signature: bytes

    def to_json(self) -> dict[str, str]:
        return {"alg": ALG, "key": b64e(self.key), "sig": b64e(self.signature)}

    @classmethod
    def from_json(cls, data: Any) -> KemCard:
        """Its form only (the signature is `signed_by`'s); ValueError says what is wrong."""
        if not isinstance(data, dict) or data.get("alg") != ALG:
            raise ValueError(f"'kem' must be an object with \"alg\": \"{ALG}\"")
        return cls(b64d(data.get("key"), KEM_PUBLIC), b64d(data.get("sig"), 64))  # type: ignore[arg-type]

    def signed_by(self, fp: str, sign_key: bytes) -> bool:
        """Whether `sign_key` (the one `fp` covers) signed this as `fp`'s KEM key, and it is one
        anything can be sealed to."""
        try:
            VerifyKey(sign_key).verify(_body(fp, self.key), self.signature)
        except (BadSignatureError, ValueError):
            return False
        return usable_kem_key(self.key)


def sign_kem_card(fp: str, key: bytes, sign: Callable[[bytes], bytes]) -> KemCard:
    return KemCard(key, sign(_body(fp, key)))
