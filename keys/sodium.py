"""libsodium's primitives as talk uses them: Curve25519 boxes (`Box`, `SealedBox`), `SecretBox`,
Ed25519 signatures (`SigningKey`, `VerifyKey`), X25519 (`crypto_scalarmult`) and the secretstream
that seals files (`SecretStream`). The only module that calls libsodium, but for argon2, which
only a passphrase unlock needs (`keys.keystore` takes it from PyNaCl when it does).

It calls PyNaCl's compiled module directly: PyNaCl's own wrappers (`nacl.public`, `nacl.signing`,
`nacl.secret`) load every binding module PyNaCl has, which costs a one-message `talk receive`
several times what the compiled module does. The classes keep PyNaCl's names, byte formats and
errors, so whatever either wrote the other opens, and every `except` written for PyNaCl holds:

    nacl.exceptions.CryptoError          a box, sealed box or stream chunk does not open
    ├── BadSignatureError                a signature does not verify
    ├── nacl.exceptions.TypeError        a key not given as bytes; a ciphertext shorter than its tag
    ├── nacl.exceptions.ValueError       a key, nonce, seed or signature of the wrong length
    └── nacl.exceptions.RuntimeError     libsodium refused: a public key of low order agrees on nothing

(PyNaCl's TypeError and ValueError are also the builtin ones.) Every length is checked here, so
no short buffer reaches C.
"""

from __future__ import annotations

import os
from functools import lru_cache
from typing import Any, ClassVar

from nacl import exceptions as exc
from nacl._sodium import ffi, lib

__all__ = [
    "Box",
    "PrivateKey",
    "PublicKey",
    "SealedBox",
    "SecretBox",
    "SecretStream",
    "SignedMessage",
    "SigningKey",
    "VerifyKey",
    "crypto_scalarmult",
    "crypto_secretbox_easy",
]

if lib.sodium_init() not in (0, 1):  # 1: already initialised in this process
    raise exc.RuntimeError("libsodium could not initialise")

_BOX_KEY: int = lib.crypto_box_publickeybytes()
_BOX_SECRET: int = lib.crypto_box_secretkeybytes()
_BOX_SHARED: int = lib.crypto_box_beforenmbytes()
_SEAL: int = lib.crypto_box_sealbytes()
_SIGN_KEY: int = lib.crypto_sign_publickeybytes()
_SIGN_SEED: int = lib.crypto_sign_secretkeybytes() // 2  # seed ‖ public key; no seedbytes() here
_SIGN_SECRET: int = lib.crypto_sign_secretkeybytes()
_SIGNATURE: int = lib.crypto_sign_bytes()
_SCALAR: int = lib.crypto_scalarmult_scalarbytes()
_POINT: int = lib.crypto_scalarmult_bytes()


def _exact(value: bytes, size: int, what: str) -> bytes:
    if not isinstance(value, bytes):
        raise exc.TypeError(f"{what} must be given as bytes, not {type(value).__name__}")
    if len(value) != size:
        raise exc.ValueError(f"{what} must be exactly {size} bytes long, not {len(value)}")
    return value


def _check(rc: int, what: str) -> None:
    if rc != 0:
        raise exc.RuntimeError(f"libsodium refused to {what}")


def _out(size: int) -> Any:
    return ffi.new("unsigned char[]", max(1, size))  # never empty: C always gets a real pointer


def _read(buf: Any, size: int) -> bytes:
    data: bytes = ffi.buffer(buf, size)[:]
    return data


def _same(a: bytes, b: bytes) -> bool:  # in constant time, as keys are compared
    return len(a) == len(b) and lib.sodium_memcmp(a, b, len(a)) == 0


def crypto_scalarmult(n: bytes, p: bytes) -> bytes:
    """X25519: the secret scalar `n` times the point `p` (libsodium clamps `n`).

    Raises:
        nacl.exceptions.RuntimeError: `p` is of low order, so the product agrees on nothing.
    """
    q = _out(_POINT)
    _check(lib.crypto_scalarmult(q, _exact(n, _SCALAR, "a scalar"), _exact(p, _POINT, "a point")),
           "multiply by a point of low order")
    return _read(q, _POINT)


class _PublicBytes:
    """A public key that is its bytes: checked for length once, compared in constant time."""

    SIZE: ClassVar[int]
    WHAT: ClassVar[str]

    def __init__(self, key: bytes) -> None:
        self._key = _exact(key, self.SIZE, self.WHAT)

    def __bytes__(self) -> bytes:
        return self._key

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and _same(self._key, other._key)

    def __hash__(self) -> int:
        return hash(self._key)


class PublicKey(_PublicBytes):
    """A Curve25519 public key."""

    SIZE: ClassVar[int] = _BOX_KEY
    WHAT: ClassVar[str] = "a Curve25519 public key"


class PrivateKey:
    """A Curve25519 secret key and its `public_key`."""

    SIZE: ClassVar[int] = _BOX_SECRET

    def __init__(self, private_key: bytes) -> None:
        if not (isinstance(private_key, bytes) and len(private_key) == self.SIZE):
            raise exc.TypeError(f"a Curve25519 secret key is {self.SIZE} bytes")
        public = _out(_BOX_KEY)
        _check(lib.crypto_scalarmult_base(public, private_key), "derive a public key")
        self._key = private_key
        self.public_key = PublicKey(_read(public, _BOX_KEY))

    @classmethod
    def generate(cls) -> PrivateKey:
        return cls(os.urandom(cls.SIZE))

    def __bytes__(self) -> bytes:
        return self._key

    def __eq__(self, other: object) -> bool:
        return isinstance(other, PrivateKey) and self.public_key == other.public_key

    def __hash__(self) -> int:
        return hash(self.public_key)


class _NonceBox:
    """What `Box` and `SecretBox` share: nonce ‖ ciphertext, the ciphertext carrying a 16-byte tag,
    sealed by libsodium's `*_easy` call of the same shape for both."""

    NONCE_SIZE: ClassVar[int]
    MACBYTES: ClassVar[int]
    _seal: ClassVar[Any]
    _open: ClassVar[Any]
    _key: bytes

    def encrypt(self, plaintext: bytes, nonce: bytes | None = None) -> bytes:
        """nonce ‖ ciphertext; a random nonce unless one is given (it must never repeat for a key)."""
        nonce = os.urandom(self.NONCE_SIZE) if nonce is None else _exact(nonce, self.NONCE_SIZE, "a nonce")
        return nonce + _easy(type(self)._seal, self.MACBYTES, plaintext, nonce, self._key)

    def decrypt(self, ciphertext: bytes, nonce: bytes | None = None) -> bytes:
        """The plaintext of `ciphertext` (nonce-prefixed unless `nonce` is given).

        Raises:
            nacl.exceptions.CryptoError: it does not open under this key (a ValueError also if the
                nonce is short, a TypeError also if the ciphertext is shorter than its tag).
        """
        if nonce is None:
            nonce, ciphertext = ciphertext[: self.NONCE_SIZE], ciphertext[self.NONCE_SIZE :]
        _exact(nonce, self.NONCE_SIZE, "a nonce")
        if len(ciphertext) < self.MACBYTES:
            raise exc.TypeError(f"a ciphertext is at least {self.MACBYTES} bytes, not {len(ciphertext)}")
        size = len(ciphertext) - self.MACBYTES
        plain = _out(size)
        if type(self)._open(plain, ciphertext, len(ciphertext), nonce, self._key) != 0:
            raise exc.CryptoError("a ciphertext did not open: altered, or sealed under another key")
        return _read(plain, size)


def _easy(seal: Any, mac: int, message: bytes, nonce: bytes, key: bytes) -> bytes:
    size = len(message) + mac
    out = _out(size)
    _check(seal(out, message, len(message), nonce, key), "seal a message")
    return _read(out, size)


# Kept for the pairs used last. A send agrees twice with its contact's key (the inner Box, the
# channel tags) and every message to or from that contact agrees the same again: an X25519 each
# time, tens of microseconds, a tenth of opening a message. The process holds the secret keys
# these come from anyway; a key of low order raises, and nothing is kept.
@lru_cache(maxsize=256)
def _agreed(sk: bytes, pk: bytes) -> bytes:
    """The key the secret key `sk` and the public key `pk` agree on (crypto_box_beforenm)."""
    shared = _out(_BOX_SHARED)
    _check(lib.crypto_box_beforenm(shared, pk, sk), "agree on a key with a public key of low order")
    return _read(shared, _BOX_SHARED)


class Box(_NonceBox):
    """Authenticated encryption between one secret key and another's public key."""

    NONCE_SIZE: ClassVar[int] = lib.crypto_box_noncebytes()
    MACBYTES: ClassVar[int] = lib.crypto_box_macbytes()
    _seal = lib.crypto_box_easy_afternm
    _open = lib.crypto_box_open_easy_afternm

    def __init__(self, private_key: PrivateKey, public_key: PublicKey) -> None:
        """Raises:
            nacl.exceptions.RuntimeError: `public_key` is of low order: it agrees on nothing.
        """
        pk = _exact(bytes(public_key), _BOX_KEY, "a Curve25519 public key")
        sk = _exact(bytes(private_key), _BOX_SECRET, "a Curve25519 secret key")
        self._key = _agreed(sk, pk)

    def shared_key(self) -> bytes:
        return self._key


class SecretBox(_NonceBox):
    """Authenticated encryption under one 32-byte key (XSalsa20-Poly1305)."""

    KEY_SIZE: ClassVar[int] = lib.crypto_secretbox_keybytes()
    NONCE_SIZE: ClassVar[int] = lib.crypto_secretbox_noncebytes()
    MACBYTES: ClassVar[int] = lib.crypto_secretbox_macbytes()
    _seal = lib.crypto_secretbox_easy
    _open = lib.crypto_secretbox_open_easy

    def __init__(self, key: bytes) -> None:
        self._key = _exact(key, self.KEY_SIZE, "a secret box key")

    def __bytes__(self) -> bytes:
        return self._key


def crypto_secretbox_easy(message: bytes, nonce: bytes, key: bytes) -> bytes:
    """`SecretBox(key).encrypt(message, nonce)` without the nonce in front."""
    _exact(nonce, SecretBox.NONCE_SIZE, "a nonce")
    _exact(key, SecretBox.KEY_SIZE, "a secret box key")
    return _easy(lib.crypto_secretbox_easy, SecretBox.MACBYTES, message, nonce, key)


class SealedBox:
    """Anonymous encryption to a public key: an ephemeral key's box, opened by the secret key."""

    def __init__(self, recipient_key: PublicKey | PrivateKey) -> None:
        public = getattr(recipient_key, "public_key", None)  # a secret key carries its public one
        key = recipient_key if public is None else public
        self._public = _exact(bytes(key), _BOX_KEY, "a Curve25519 public key")
        self._secret = None if public is None else _exact(bytes(recipient_key), _BOX_SECRET,
                                                          "a Curve25519 secret key")

    def encrypt(self, plaintext: bytes) -> bytes:
        size = len(plaintext) + _SEAL
        out = _out(size)
        _check(lib.crypto_box_seal(out, plaintext, len(plaintext), self._public), "seal a message")
        return _read(out, size)

    def decrypt(self, ciphertext: bytes) -> bytes:
        """Raises:
            nacl.exceptions.CryptoError: it was not sealed to this key, or was altered (a TypeError
                also if it is shorter than any sealed box).
            TypeError: this box was made from a public key, which cannot open.
        """
        if self._secret is None:
            raise TypeError("a sealed box made from a public key cannot open")
        if len(ciphertext) < _SEAL:
            raise exc.TypeError(f"a sealed box is at least {_SEAL} bytes, not {len(ciphertext)}")
        size = len(ciphertext) - _SEAL
        plain = _out(size)
        if lib.crypto_box_seal_open(plain, ciphertext, len(ciphertext), self._public, self._secret) != 0:
            raise exc.CryptoError("a sealed box did not open: altered, or sealed to another key")
        return _read(plain, size)


class SignedMessage(bytes):
    """signature ‖ message, as PyNaCl's `sign` returns it."""

    @property
    def signature(self) -> bytes:
        return bytes(self[:_SIGNATURE])

    @property
    def message(self) -> bytes:
        return bytes(self[_SIGNATURE:])


class VerifyKey(_PublicBytes):
    """An Ed25519 public key."""

    SIZE: ClassVar[int] = _SIGN_KEY
    WHAT: ClassVar[str] = "an Ed25519 public key"

    def verify(self, smessage: bytes, signature: bytes | None = None) -> bytes:
        """The message, if `signature` (or, when None, the front of `smessage`) signs it.

        Raises:
            BadSignatureError: it does not.
            nacl.exceptions.ValueError: a signature that is not 64 bytes.
        """
        if signature is not None:
            smessage = _exact(signature, _SIGNATURE, "a signature") + smessage
        message = _out(len(smessage))
        size = ffi.new("unsigned long long *")
        if lib.crypto_sign_open(message, size, smessage, len(smessage), self._key) != 0:
            raise exc.BadSignatureError("Signature was forged or corrupt")
        return _read(message, size[0])


class SigningKey:
    """An Ed25519 secret key, made from its 32-byte seed, and its `verify_key`."""

    def __init__(self, seed: bytes) -> None:
        _exact(seed, _SIGN_SEED, "an Ed25519 seed")
        public, secret = _out(_SIGN_KEY), _out(_SIGN_SECRET)
        _check(lib.crypto_sign_seed_keypair(public, secret, seed), "derive a signing key")
        self._seed = seed
        self._secret = _read(secret, _SIGN_SECRET)
        self.verify_key = VerifyKey(_read(public, _SIGN_KEY))

    @classmethod
    def generate(cls) -> SigningKey:
        return cls(os.urandom(_SIGN_SEED))

    def __bytes__(self) -> bytes:
        return self._seed

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SigningKey) and _same(self._seed, other._seed)

    def __hash__(self) -> int:
        return hash(self.verify_key)

    def sign(self, message: bytes) -> SignedMessage:
        signed = _out(len(message) + _SIGNATURE)
        size = ffi.new("unsigned long long *")
        _check(lib.crypto_sign(signed, size, message, len(message), self._secret), "sign")
        return SignedMessage(_read(signed, size[0]))


class SecretStream:
    """One direction of a secretstream (XChaCha20-Poly1305): its state moves on with each chunk.
    `bytes()` of it is that state, which the constructor takes back to go on where it stopped."""

    ABYTES: ClassVar[int] = lib.crypto_secretstream_xchacha20poly1305_abytes()
    HEADER_BYTES: ClassVar[int] = lib.crypto_secretstream_xchacha20poly1305_headerbytes()
    KEY_BYTES: ClassVar[int] = lib.crypto_secretstream_xchacha20poly1305_keybytes()
    STATE_BYTES: ClassVar[int] = lib.crypto_secretstream_xchacha20poly1305_statebytes()
    TAG_MESSAGE: ClassVar[int] = lib.crypto_secretstream_xchacha20poly1305_tag_message()
    TAG_FINAL: ClassVar[int] = lib.crypto_secretstream_xchacha20poly1305_tag_final()

    def __init__(self, saved: bytes | None = None) -> None:
        self._state = ffi.new("unsigned char[]", self.STATE_BYTES)
        if saved is not None:
            if len(saved) != self.STATE_BYTES:
                raise ValueError(f"a saved stream state is {self.STATE_BYTES} bytes, not {len(saved)}")
            ffi.buffer(self._state)[:] = saved

    def __bytes__(self) -> bytes:
        return _read(self._state, self.STATE_BYTES)

    def init_push(self, key: bytes) -> bytes:
        """Start sealing under `key`; returns the header the opener starts from."""
        header = _out(self.HEADER_BYTES)
        key = _exact(key, self.KEY_BYTES, "a stream key")
        rc = lib.crypto_secretstream_xchacha20poly1305_init_push(self._state, header, key)
        _check(rc, "start a stream")
        return _read(header, self.HEADER_BYTES)

    def push(self, plain: bytes, tag: int) -> bytes:
        size = len(plain) + self.ABYTES
        out = _out(size)
        _check(lib.crypto_secretstream_xchacha20poly1305_push(
            self._state, out, ffi.NULL, plain, len(plain), ffi.NULL, 0, tag), "seal a chunk")
        return _read(out, size)

    def init_pull(self, header: bytes, key: bytes) -> None:
        header = _exact(header, self.HEADER_BYTES, "a stream header")
        key = _exact(key, self.KEY_BYTES, "a stream key")
        rc = lib.crypto_secretstream_xchacha20poly1305_init_pull(self._state, header, key)
        _check(rc, "open a stream")

    def pull(self, chunk: bytes) -> tuple[bytes, int]:
        """(plaintext, tag) of the stream's next chunk.

        Raises:
            nacl.exceptions.CryptoError: it does not open in this place of this stream (a TypeError
                also if it is shorter than its tag).
        """
        if len(chunk) < self.ABYTES:
            raise exc.TypeError(f"a stream chunk is at least {self.ABYTES} bytes, not {len(chunk)}")
        size = len(chunk) - self.ABYTES
        plain, tag = _out(size), ffi.new("unsigned char *")
        if lib.crypto_secretstream_xchacha20poly1305_pull(
                self._state, plain, ffi.NULL, tag, chunk, len(chunk), ffi.NULL, 0) != 0:
            raise exc.CryptoError("a stream chunk did not open: altered, out of place or from another stream")
        return _read(plain, size), int(tag[0])
