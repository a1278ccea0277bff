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

from nacl.exceptions import CryptoError

from durable.errors import TamperedChunk
from keys.sodium import SecretStream

__all__ = ["ABYTES", "CHUNK_BYTES", "HEADER_BYTES", "KEY_BYTES", "Opener", "Sealer", "chunk_count"]

CHUNK_BYTES = 256 * 1024
ABYTES = SecretStream.ABYTES
HEADER_BYTES = SecretStream.HEADER_BYTES
KEY_BYTES = SecretStream.KEY_BYTES
TAG_MESSAGE = SecretStream.TAG_MESSAGE
TAG_FINAL = SecretStream.TAG_FINAL


def chunk_count(size: int) -> int:
    """How many chunks a file of `size` bytes is sealed into (one, even when empty)."""
    if size < 0:
        raise ValueError("a file size is never negative")
    return max(1, math.ceil(size / CHUNK_BYTES))


def _check_key(key: bytes) -> None:
    if len(key) != KEY_BYTES:
        raise ValueError(f"a file key is {KEY_BYTES} bytes, not {len(key)}")


class Sealer:
    """Seals a file's chunks in order; `header` goes to the recipient with the key."""

    def __init__(self, key: bytes, state: bytes | None = None) -> None:
        _check_key(key)
        self._stream = SecretStream(state)
        self.header = b""  # a resumed sealer's header is the one recorded when it began
        if state is None:
            self.header = self._stream.init_push(key)

    def seal(self, plain: bytes, last: bool) -> bytes:
        if len(plain) > CHUNK_BYTES:
            raise ValueError(f"a chunk holds at most {CHUNK_BYTES} bytes")
        tag = TAG_FINAL if last else TAG_MESSAGE
        return self._stream.push(plain, tag)

    def state(self) -> bytes:
        return bytes(self._stream)


class Opener:
    """Opens a file's chunks in order, refusing any that is forged, misplaced or ends early."""

    def __init__(self, key: bytes, header: bytes, state: bytes | None = None) -> None:
        _check_key(key)
        if len(header) != HEADER_BYTES:
            raise TamperedChunk(f"a file's stream header is {HEADER_BYTES} bytes, not {len(header)}")
        self._stream = SecretStream(state)
        if state is None:
            self._stream.init_pull(header, key)

    def open(self, chunk: bytes, last_expected: bool) -> bytes:
        """Raises:
            TamperedChunk: the chunk fails its tag (forged, reordered, from another file), says
                it is the last before it should, or is the last and does not say so.
        """
        if not ABYTES <= len(chunk) <= CHUNK_BYTES + ABYTES:
            raise TamperedChunk(f"a file chunk of {len(chunk)} bytes cannot be one this stream sealed")
        try:
            plain, tag = self._stream.pull(chunk)
        except CryptoError:
            raise TamperedChunk("a file chunk does not open: altered, out of order or from another "
                                "file") from None
        if tag == TAG_FINAL and not last_expected:
            raise TamperedChunk("a file's stream ends before its last chunk: the file was cut or altered")
        if tag != TAG_FINAL and last_expected:
            raise TamperedChunk("a file's last chunk does not end its stream: the file was truncated")
        return plain

    def state(self) -> bytes:
        return bytes(self._stream)
