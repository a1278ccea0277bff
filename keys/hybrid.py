"""The post-quantum hybrid outer layer: X25519 and ML-KEM-768 together, so a relay's recording
opens for nobody who has broken only one of them.

    blob = E ‖ C ‖ SecretBox(K).encrypt(payload)

    E  a fresh X25519 public key (32 bytes); ss_x = X25519(e, recipient box key)
    C  an ML-KEM-768 ciphertext (1088 bytes) to the recipient's pinned KEM key; ss_m its secret
    K  = BLAKE2b-256(person="talk-hybrid-v1", ss_m ‖ ss_x ‖ C ‖ E ‖ recipient box key ‖ KEM key)

The combiner is X-Wing's idea with BLAKE2b in place of SHA3: the key is a hash of both shared
secrets, so it stays unknown to whoever lacks either of them, and of every public value of the
exchange (both ciphertexts, both recipient keys), so no part can be swapped for another that
yields the same secret. `payload` is what the classic envelope seals: the sender's box key and
the inner Box (`keys.envelope`). The key is used once, with SecretBox's random nonce.

Pure: bytes in, bytes out. pyca/cryptography's ML-KEM is imported on first use from its Rust
bindings, which cost a third of the public `mlkem` module's import, so mail that never meets
a KEM key (or `import keys`) pays nothing.
"""

from __future__ import annotations

import os
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from nacl.exceptions import CryptoError

from durable.digests import blake2b
from durable.errors import TamperedMessage
from keys.sodium import PrivateKey, SecretBox, crypto_scalarmult

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.mlkem import MLKEM768PrivateKey

__all__ = ["KEM_CIPHERTEXT", "KEM_PUBLIC", "KEM_SEED", "OUTER", "kem_public_key", "new_kem_seed",
           "open_outer", "seal_outer", "usable_kem_key"]

KEM_SEED = 64  # FIPS 203's d ‖ z: the whole private key
KEM_PUBLIC = 1184
KEM_CIPHERTEXT = 1088
PERSON = b"talk-hybrid-v1"
OUTER = 32 + KEM_CIPHERTEXT + SecretBox.NONCE_SIZE + SecretBox.MACBYTES  # what it adds to the payload


def _mlkem() -> Any:
    """pyca/cryptography's ML-KEM functions (`from_mlkem768_*`), straight from its Rust module."""
    from cryptography.hazmat.bindings._rust import openssl

    return openssl.mlkem


def new_kem_seed() -> bytes:
    return os.urandom(KEM_SEED)


@lru_cache(maxsize=8)
def _secret(seed: bytes) -> MLKEM768PrivateKey:
    """The key a seed expands to; kept, since a follower opens every message with the same one."""
    key: MLKEM768PrivateKey = _mlkem().from_mlkem768_seed_bytes(seed)
    return key


@lru_cache(maxsize=8)
def kem_public_key(seed: bytes) -> bytes:
    return bytes(_secret(seed).public_key().public_bytes_raw())


def usable_kem_key(key: bytes) -> bool:
    """Whether `key` is an ML-KEM-768 public key anything can be encapsulated to (FIPS 203's
    modulus check): a peer's key is checked once, before it is pinned."""
    if len(key) != KEM_PUBLIC:
        return False
    try:
        _mlkem().from_mlkem768_public_bytes(key)
    except ValueError:
        return False
    return True


def _key(ss_m: bytes, ss_x: bytes, ciphertext: bytes, ephemeral: bytes, box_key: bytes,
         kem_key: bytes) -> bytes:
    h = blake2b(digest_size=SecretBox.KEY_SIZE, person=PERSON)
    for part in (ss_m, ss_x, ciphertext, ephemeral, box_key, kem_key):
        h.update(part)
    return h.digest()


def _encapsulate(kem_key: bytes) -> tuple[bytes, bytes]:
    ss_m, ciphertext = _mlkem().from_mlkem768_public_bytes(kem_key).encapsulate()
    return bytes(ss_m), bytes(ciphertext)


def seal_outer(payload: bytes, box_key: bytes, kem_key: bytes) -> bytes:
    """`payload` sealed to the holder of both `box_key` (X25519) and `kem_key` (ML-KEM-768).

    Raises:
        ValueError: `kem_key` is not an ML-KEM-768 public key (pinned keys were checked).
        nacl's RuntimeError: `box_key` agrees on nothing (pinned keys were checked).
    """
    ss_m, ciphertext = _encapsulate(kem_key)
    ephemeral = PrivateKey.generate()
    e = bytes(ephemeral.public_key)
    ss_x = crypto_scalarmult(bytes(ephemeral), box_key)
    key = _key(ss_m, ss_x, ciphertext, e, box_key, kem_key)
    return e + ciphertext + bytes(SecretBox(key).encrypt(payload))


def open_outer(blob: bytes, box_secret: PrivateKey, kem_seed: bytes) -> bytes:
    """The payload of a blob `seal_outer` made for these keys.

    Raises:
        TamperedMessage: it is not one, or any byte of it was changed.
    """
    if len(blob) < OUTER:
        raise TamperedMessage("a message did not decrypt: it was tampered with or not for you")
    e, ciphertext, body = blob[:32], blob[32:32 + KEM_CIPHERTEXT], blob[32 + KEM_CIPHERTEXT:]
    secret = _secret(kem_seed)
    try:
        ss_x = crypto_scalarmult(bytes(box_secret), e)
    except RuntimeError as exc:  # a low-order point: libsodium refuses the all-zero secret
        raise TamperedMessage("a message did not decrypt: it was tampered with or not for you") from exc
    # ML-KEM never fails on a changed ciphertext: it yields an unrelated secret (implicit
    # rejection), which SecretBox's MAC then refuses.
    ss_m = secret.decapsulate(ciphertext)
    key = _key(ss_m, ss_x, ciphertext, e, bytes(box_secret.public_key), kem_public_key(kem_seed))
    try:
        return bytes(SecretBox(key).decrypt(body))
    except CryptoError as exc:
        raise TamperedMessage("a message did not decrypt: it was tampered with or not for you") from exc
