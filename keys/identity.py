"""An identity: an Ed25519 signing key, an X25519 box key, the fingerprint that names both, and
an ML-KEM-768 key for post-quantum sealing (`keys.hybrid`).

The fingerprint is the address. Whoever holds it can check any key bundle a relay hands out,
so a relay can serve keys but never substitute them. The KEM key came later than fingerprints,
so it is not hashed into them: the bundle carries it in a card the signing key signs
(`keys.kem_card`), and an identity made before it has none until its first unlock adds one.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from nacl.exceptions import BadSignatureError

from durable.digests import blake2b
from durable.errors import PinMismatch, UserError
from keys.encoding import b64d, b64e, canonical_json, is_hex32
from keys.hybrid import KEM_SEED, kem_public_key, new_kem_seed
from keys.kem_card import KemCard, sign_kem_card
from keys.names import MAX_NAME, check_name
from keys.sodium import PrivateKey, SealedBox, SigningKey, VerifyKey

__all__ = ["Identity", "KeyBundle", "parse_fingerprint"]

BUNDLE_CONTEXT = b"talk-bundle-v1\n"


def fingerprint(sign_key: bytes, box_key: bytes) -> str:
    """First 16 bytes of BLAKE2b over both public keys, as 32 hex characters."""
    return blake2b(sign_key + box_key, digest_size=16).hexdigest()


class KeyBundle(NamedTuple):
    """The public half of an identity, self-signed, as the key directory serves it."""

    name: str
    sign_key: bytes
    box_key: bytes
    signature: bytes
    kem: KemCard | None = None  # not covered by `signature`: its own checks it (`kem_key`)

    @property
    def fingerprint(self) -> str:
        return fingerprint(self.sign_key, self.box_key)

    def to_json(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "name": self.name,
            "sign_key": b64e(self.sign_key),
            "box_key": b64e(self.box_key),
            "signature": b64e(self.signature),
        }
        if self.kem is not None:
            body["kem"] = self.kem.to_json()
        return body

    def kem_key(self) -> bytes | None:
        """The KEM key, if the bundle has one its own signing key signed for its fingerprint."""
        if self.kem is None or not self.kem.signed_by(self.fingerprint, self.sign_key):
            return None
        return self.kem.key

    @classmethod
    def from_json(cls, data: Any) -> KeyBundle:
        """Parse a bundle; ValueError says which field is wrong."""
        if not isinstance(data, dict):
            raise ValueError("key bundle must be a JSON object")
        name = data.get("name")
        if not isinstance(name, str) or not 0 < len(name) <= MAX_NAME:
            raise ValueError("key bundle needs a 'name' of 1-64 characters")
        return cls(
            name=name,
            sign_key=b64d(data.get("sign_key"), 32),  # type: ignore[arg-type]
            box_key=b64d(data.get("box_key"), 32),  # type: ignore[arg-type]
            signature=b64d(data.get("signature"), 64),  # type: ignore[arg-type]
            kem=None if data.get("kem") is None else KemCard.from_json(data["kem"]),
        )

    def signed_part(self) -> bytes:
        body = {"name": self.name, "sign_key": b64e(self.sign_key), "box_key": b64e(self.box_key)}
        return BUNDLE_CONTEXT + canonical_json(body)

    def self_signed(self) -> bool:
        try:
            VerifyKey(self.sign_key).verify(self.signed_part(), self.signature)
        except (BadSignatureError, ValueError):
            return False
        return True

    def check_against(self, expected_fingerprint: str) -> None:
        """Raise PinMismatch unless these keys hash to the fingerprint we already trust."""
        if self.fingerprint != expected_fingerprint or not self.self_signed():
            raise PinMismatch(
                f"PIN MISMATCH: the relay served keys for {expected_fingerprint} that do not "
                "match that fingerprint; nothing was sent or pinned. Check the fingerprint "
                "with your peer over another channel and report the relay to its operator."
            )


class Identity(NamedTuple):
    """A private identity, unlocked in memory."""

    name: str
    signing_key: SigningKey
    box_secret: PrivateKey
    kem_seed: bytes | None = None  # None: made before KEM keys, until `with_kem`

    @classmethod
    def generate(cls, name: str) -> Identity:
        return cls(check_name(name), SigningKey.generate(), PrivateKey.generate(), new_kem_seed())

    @classmethod
    def from_secret(cls, name: str, secret: bytes) -> Identity:
        """Rebuild from what `stored_bytes()` gives: signing seed, box key, then the KEM seed
        (absent from an identity made before KEM keys: 64 bytes, not 128)."""
        kem = secret[64:64 + KEM_SEED] if len(secret) == 64 + KEM_SEED else None
        return cls(name, SigningKey(secret[:32]), PrivateKey(secret[32:64]), kem)

    def with_kem(self) -> Identity:
        """This identity with a new KEM key, if it has none yet."""
        return self if self.kem_seed is not None else self._replace(kem_seed=new_kem_seed())

    def secret_bytes(self) -> bytes:
        """The signing seed and box key: what keys at rest are derived from (ratchet pickles), so
        it stays these 64 bytes whether or not a KEM key was added."""
        return bytes(self.signing_key) + bytes(self.box_secret)

    def stored_bytes(self) -> bytes:
        """What the keystore keeps and `from_secret` reads: `secret_bytes`, then the KEM seed."""
        return self.secret_bytes() + (self.kem_seed or b"")

    @property
    def sign_public(self) -> bytes:
        return bytes(self.signing_key.verify_key)

    @property
    def box_public(self) -> bytes:
        return bytes(self.box_secret.public_key)

    @property
    def fingerprint(self) -> str:
        return fingerprint(self.sign_public, self.box_public)

    def bundle(self) -> KeyBundle:
        unsigned = KeyBundle(self.name, self.sign_public, self.box_public, b"\0" * 64)
        signature = self.signing_key.sign(unsigned.signed_part()).signature
        kem = None if self.kem_seed is None else sign_kem_card(
            self.fingerprint, kem_public_key(self.kem_seed), self.sign)
        return KeyBundle(self.name, self.sign_public, self.box_public, signature, kem)

    def sign(self, message: bytes) -> bytes:
        return bytes(self.signing_key.sign(message).signature)

    def unseal(self, blob: bytes) -> bytes:
        """Open a SealedBox addressed to this identity (raises nacl's CryptoError if not)."""
        return bytes(SealedBox(self.box_secret).decrypt(blob))


def parse_fingerprint(text: str) -> str:
    """Accept a fingerprint with spaces, colons or upper case; return 32 lowercase hex."""
    cleaned = text.replace(" ", "").replace(":", "").replace("-", "").lower()
    if not is_hex32(cleaned):
        raise UserError(
            f"{text!r} is not a fingerprint: expected 32 hex characters, as `talk id` prints"
        )
    return cleaned
