"""One file's download: chunks fetched in order, opened, appended to a private partial file,
checked whole; resumable from the last saved point after a kill.

Every byte comes from the relay and was sealed by a peer: each chunk opens only in its place in
the stream (`keys.filestream.Opener`), holds exactly the bytes its place in the announced size
calls for, and the whole must hash to the announced sha256. Anything else ends the download
with `DownloadFailed`, whose text is the reason the message is quarantined with; a fault of this
machine or of the way to the relay (OSError, RelayError other than a missing chunk) propagates as
itself and the download is tried again later.

Resuming. Every `SAVE_EVERY` chunks the file's bytes are synced, then `save` is handed a
`Progress`: the next chunk's index, the file's length so far, and the opener's state after it.
A download given that progress truncates the partial file to its length (a kill may have left
more, never synced or never saved) and goes on from its index. The hash cannot be saved
half-way, so the bytes kept are read once more to hash them: a pass over the disk, in blocks,
never the whole file in memory. The saved state opens the rest of the stream: whoever keeps it
keeps what the key gives, and erases it with the key (`follower.files.parked`).
"""

from __future__ import annotations

import io
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from durable.digests import sha256
from durable.errors import RelayError, SecurityError, TamperedChunk
from durable.files import open_private
from keys.fileref import FileRef
from keys.filestream import CHUNK_BYTES, Opener, chunk_count

if TYPE_CHECKING:
    import hashlib

__all__ = ["SAVE_EVERY", "DownloadFailed", "Progress", "download", "expected_length", "missing_chunk"]

SAVE_EVERY = 8  # chunks (2 MiB) between saved points: what a kill costs at most
READ_BLOCK = 1024 * 1024


class DownloadFailed(SecurityError):
    """A file a message announced cannot be taken: its text is why (quarantined with it)."""


class Progress(NamedTuple):
    chunk: int  # the next chunk to fetch
    offset: int  # the partial file's length once chunks 0..chunk-1 are written
    state: bytes  # the opener's state after chunk-1


def missing_chunk(exc: RelayError, index: int) -> Exception:
    """What a relay's refusal to serve chunk `index` means: the file is gone (never uploaded
    whole, expired, or acked away) when it says so; anything else is a fault to try again."""
    if exc.code == "no_such_chunk":
        return DownloadFailed(f"chunk {index} of the file is not on the relay (never uploaded, or "
                              "expired): ask the sender to send it again")
    return exc


def expected_length(ref: FileRef, index: int) -> int:
    """How many plaintext bytes chunk `index` of `ref` holds: full but for the last."""
    last = chunk_count(ref.size) - 1
    return CHUNK_BYTES if index < last else ref.size - last * CHUNK_BYTES


def check_limit(ref: FileRef, limit: int) -> None:
    if ref.size > limit:
        raise DownloadFailed(f"a file of {ref.size:,} bytes is over this side's limit of {limit:,} bytes "
                             "(TALK_MAX_FILE_BYTES); ask the sender to split it")


def download(ref: FileRef, fetch: Callable[[int], bytes], partial: Path, saved: Progress | None,
             save: Callable[[Progress], None], limit: int) -> None:
    """Fetch, open and write `ref`'s chunks into `partial` from `saved` on (None: from the start),
    then check the whole; `fetch(i)` is chunk i's sealed bytes. On return, `partial` holds the
    file, synced, of the announced size and hash.

    Raises:
        DownloadFailed: a chunk does not open in its place, holds more or fewer bytes than the
            announced size calls for, the whole hashes otherwise, or the file is over `limit`.
        OSError, RelayError: a fault of this machine or of the relay (`fetch`'s); try again.
    """
    check_limit(ref, limit)
    fd = open_private(partial, os.O_RDWR | os.O_CREAT, 0o600)
    with os.fdopen(fd, "r+b") as out:
        start, opener = _resume(saved, ref, os.fstat(fd).st_size)
        out.truncate(start.offset)
        digest = _hash_kept(out, start.offset)
        out.seek(0, os.SEEK_END)
        total = chunk_count(ref.size)
        for index in range(start.chunk, total):
            plain = _open(opener, fetch(index), index, total)
            if len(plain) != expected_length(ref, index):
                raise DownloadFailed(_length_reason(ref, index, len(plain)))
            out.write(plain)
            digest.update(plain)
            if (index + 1) % SAVE_EVERY == 0 and index + 1 < total:
                _sync(out)
                save(Progress(index + 1, out.tell(), opener.state()))
        _sync(out)
    if digest.hexdigest() != ref.sha256:
        raise DownloadFailed("a file's bytes do not hash to the sha256 its message announced: altered "
                             "on the way or announced wrong")


def _resume(saved: Progress | None, ref: FileRef, length: int) -> tuple[Progress, Opener]:
    """Where to go on from, and the opener there: `saved`, or the start when there is none or it
    does not fit (a partial file cut shorter than its saved point, a damaged state)."""
    fits = saved is not None and (0 < saved.chunk < chunk_count(ref.size)
                                  and saved.offset == saved.chunk * CHUNK_BYTES <= length)
    if saved is not None and fits:
        try:
            return saved, Opener(ref.key, ref.header, saved.state)
        except ValueError:  # a state of the wrong size
            pass
    return Progress(0, 0, b""), Opener(ref.key, ref.header)


def _open(opener: Opener, chunk: bytes, index: int, total: int) -> bytes:
    try:
        return opener.open(chunk, last_expected=index == total - 1)
    except TamperedChunk as exc:
        raise DownloadFailed(f"chunk {index} of {total}: {exc}") from exc


def _length_reason(ref: FileRef, index: int, got: int) -> str:
    want = expected_length(ref, index)
    more = "more" if got > want else "fewer"
    return (f"chunk {index} holds {got:,} bytes where the announced size of {ref.size:,} calls for "
            f"{want:,}: the file has {more} bytes than announced")


def _hash_kept(out: io.BufferedRandom, length: int) -> hashlib._Hash:
    """The sha256 of the first `length` bytes of `out` (there: `_resumable`), read in blocks."""
    digest = sha256()
    out.seek(0)
    left = length
    while left:
        block = out.read(min(READ_BLOCK, left))
        digest.update(block)
        left -= len(block)
    return digest


def _sync(out: io.BufferedRandom) -> None:
    out.flush()
    os.fsync(out.fileno())
