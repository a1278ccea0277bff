"""A file as a stream of sealed chunks: libsodium's secretstream (XChaCha20-Poly1305).

    header (24 bytes, random) ‖ chunk₀ ‖ chunk₁ ‖ … ‖ chunkₙ₋₁ (tagged FINAL)

Each chunk is `CHUNK_BYTES` of plaintext (the last may be shorter; an empty file is one empty
final chunk) plus `ABYTES`. The stream's state moves on with every chunk, so a chunk opens only
in its place: a reordered, repeated or dropped chunk fails its tag, and a stream cut short
lacks the FINAL tag, which `Opener.open` checks on the chunk the caller expects to be last.

Resuming. `state()` is the stream's whole state (key schedule and counter); a sealer or opener
rebuilt from it goes on exactly where the first stopped. After the header, sealing is
deterministic: the same state and plaintext give the same chunk, so an upload that re-seals a
chunk it may already have sent puts the same bytes again. Re-sealing *different* plaintext from
a saved state would reuse a nonce, so the caller resumes only over a file whose hash it checked
again (`follower.files.upload`).
"""

from __future__ import annotations

import math

from nacl import bindings as sodium
from nacl._sodium import ffi
from nacl.exceptions import CryptoError

from durable.errors import TamperedChunk

__all__ = ["ABYTES", "CHUNK_BYTES", "HEADER_BYTES", "KEY_BYTES", "Opener", "Sealer", "chunk_count"]

CHUNK_BYTES = 256 * 1024
ABYTES: int = sodium.crypto_secretstream_xchacha20poly1305_ABYTES
HEADER_BYTES: int = sodium.crypto_secretstream_xchacha20poly1305_HEADERBYTES
KEY_BYTES: int = sodium.crypto_secretstream_xchacha20poly1305_KEYBYTES
STATE_BYTES: int = sodium.crypto_secretstream_xchacha20poly1305_STATEBYTES
TAG_MESSAGE: int = sodium.crypto_secretstream_xchacha20poly1305_TAG_MESSAGE
TAG_FINAL: int = sodium.crypto_secretstream_xchacha20poly1305_TAG_FINAL


def chunk_count(size: int) -> int:
    """How many chunks a file of `size` bytes is sealed into (one, even when empty)."""
    if size < 0:
        raise ValueError("a file size is never negative")
    return max(1, math.ceil(size / CHUNK_BYTES))


def _state(saved: bytes | None) -> sodium.crypto_secretstream_xchacha20poly1305_state:
    state = sodium.crypto_secretstream_xchacha20poly1305_state()
    if saved is not None:
        if len(saved) != STATE_BYTES:
            raise ValueError(f"a saved stream state is {STATE_BYTES} bytes, not {len(saved)}")
        ffi.buffer(state.statebuf)[:] = saved
    return state


def _saved(state: sodium.crypto_secretstream_xchacha20poly1305_state) -> bytes:
    return bytes(ffi.buffer(state.statebuf))


def _check_key(key: bytes) -> None:
    if len(key) != KEY_BYTES:
        raise ValueError(f"a file key is {KEY_BYTES} bytes, not {len(key)}")


class Sealer:
    """Seals a file's chunks in order; `header` goes to the recipient with the key."""

    def __init__(self, key: bytes, state: bytes | None = None) -> None:
        _check_key(key)
        self._state = _state(state)
        self.header = b""  # a resumed sealer's header is the one recorded when it began
        if state is None:
            self.header = sodium.crypto_secretstream_xchacha20poly1305_init_push(self._state, key)

    def seal(self, plain: bytes, last: bool) -> bytes:
        if len(plain) > CHUNK_BYTES:
            raise ValueError(f"a chunk holds at most {CHUNK_BYTES} bytes")
        tag = TAG_FINAL if last else TAG_MESSAGE
        return sodium.crypto_secretstream_xchacha20poly1305_push(self._state, plain, None, tag)

    def state(self) -> bytes:
        return _saved(self._state)


class Opener:
    """Opens a file's chunks in order, refusing any that is forged, misplaced or ends early."""

    def __init__(self, key: bytes, header: bytes, state: bytes | None = None) -> None:
        _check_key(key)
        if len(header) != HEADER_BYTES:
            raise TamperedChunk(f"a file's stream header is {HEADER_BYTES} bytes, not {len(header)}")
        self._state = _state(state)
        if state is None:
            sodium.crypto_secretstream_xchacha20poly1305_init_pull(self._state, header, key)
        else:  # what init_pull would have allocated: pull writes each chunk's tag there
            self._state.tagbuf = ffi.new("unsigned char *")

    def open(self, chunk: bytes, last_expected: bool) -> bytes:
        """Raises:
            TamperedChunk: the chunk fails its tag (forged, reordered, from another file), says
                it is the last before it should, or is the last and does not say so.
        """
        if not ABYTES <= len(chunk) <= CHUNK_BYTES + ABYTES:
            raise TamperedChunk(f"a file chunk of {len(chunk)} bytes cannot be one this stream sealed")
        try:
            plain, tag = sodium.crypto_secretstream_xchacha20poly1305_pull(self._state, chunk, None)
        except CryptoError:
            raise TamperedChunk("a file chunk does not open: altered, out of order or from another "
                                "file") from None
        if tag == TAG_FINAL and not last_expected:
            raise TamperedChunk("a file's stream ends before its last chunk: the file was cut or altered")
        if tag != TAG_FINAL and last_expected:
            raise TamperedChunk("a file's last chunk does not end its stream: the file was truncated")
        return bytes(plain)

    def state(self) -> bytes:
        return _saved(self._state)
