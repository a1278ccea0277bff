"""File chunks on the relay: what every backend keeps for a file, and the rules it keeps them by.

A file is a run of sealed chunks (`keys.filestream`) under a random 128-bit id, in the
recipient's mailbox, put there anonymously by the sender under its channel tag for that mailbox.
The relay never sees a key: it keeps the blobs until the owner acknowledges the file, or the mail
TTL passes since its first chunk.

Quotas, as for mail (`relay.store`): a file under a tag the owner has registered counts against
the mailbox's file quota (`max_files`, `max_bytes`); under any other tag, against a much smaller
one (`max_unknown_files`, `max_unknown_bytes`), so a stranger can never fill the room meant for
the owner's contacts. One registered tag (one contact's channel) holds at most `max_tag_bytes`
of the owner's quota, so a contact sending while the owner is away leaves room for the others.
A file is held to its tag: a chunk of the same file under another tag is refused, so nobody
moves a file between the quotas. A chunk index already stored is kept as it is (a resumed
upload re-sends it), and any file is at most `max_file_bytes` of plaintext, sealed.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum
from typing import NamedTuple, Protocol

from keys.filestream import ABYTES, CHUNK_BYTES, chunk_count

__all__ = ["ChunkOutcome", "FileProgress", "FileQuota", "FileStore", "Usage", "first_missing", "judge"]


class ChunkOutcome(StrEnum):
    STORED = "stored"
    KEPT = "kept"  # that index was stored already: nothing changed
    FILE_FULL = "file_full"  # the file would pass its limit
    MAILBOX_FULL = "mailbox_full"  # the owner's file quota is used up
    UNKNOWN_FULL = "unknown_full"  # the quota for tags the owner never registered is used up
    WRONG_TAG = "wrong_tag"  # the file was begun under another tag
    TAG_FULL = "tag_full"  # this registered tag holds its share of the owner's quota


@dataclass(frozen=True)
class FileQuota:
    max_file_bytes: int  # plaintext bytes of one file; its sealed size is `sealed_file_bytes`
    max_files: int
    max_bytes: int
    max_unknown_files: int
    max_unknown_bytes: int
    max_tag_bytes: int | None = None  # one registered tag's share of `max_bytes` (None: no share)

    @property
    def sealed_file_bytes(self) -> int:
        return self.max_file_bytes + ABYTES * chunk_count(self.max_file_bytes)

    @property
    def most_chunks(self) -> int:
        """Chunks one file may have: any index at or above this is refused before the store."""
        return chunk_count(self.max_file_bytes)


class Usage(NamedTuple):
    """What a mailbox's files of one kind (registered tags, or the rest) hold now, and of those
    the files under the chunk's own tag."""

    files: int
    bytes: int
    tag_bytes: int = 0


class FileProgress(NamedTuple):
    next: int  # the first chunk index not stored: where an interrupted upload resumes
    bytes: int  # sealed bytes stored for the file


def judge(
    quota: FileQuota, file_bytes: int | None, size: int, known: bool, usage: Usage
) -> ChunkOutcome:
    """Whether a new chunk of `size` bytes may be stored: `file_bytes` is what its file holds
    (None: a new file), `usage` what the mailbox holds of the chunk's kind (`known`)."""
    if (file_bytes or 0) + size > quota.sealed_file_bytes:
        return ChunkOutcome.FILE_FULL
    most_files, most_bytes = ((quota.max_files, quota.max_bytes) if known
                              else (quota.max_unknown_files, quota.max_unknown_bytes))
    if (file_bytes is None and usage.files >= most_files) or usage.bytes + size > most_bytes:
        return ChunkOutcome.MAILBOX_FULL if known else ChunkOutcome.UNKNOWN_FULL
    if known and quota.max_tag_bytes is not None and usage.tag_bytes + size > quota.max_tag_bytes:
        return ChunkOutcome.TAG_FULL
    return ChunkOutcome.STORED


def first_missing(indices: Iterable[int]) -> int:
    """The lowest index not among `indices`."""
    have = set(indices)
    index = 0
    while index in have:
        index += 1
    return index


def chunk_fits(size: int) -> bool:
    """Whether a body could be one sealed chunk at all."""
    return ABYTES <= size <= CHUNK_BYTES + ABYTES


class FileStore(Protocol):
    async def put_chunk(
        self, fp: str, tag: str, file_id: str, index: int, blob: bytes, now: float, quota: FileQuota
    ) -> ChunkOutcome: ...

    async def progress(self, fp: str, file_id: str) -> FileProgress:
        """(0, 0) for a file the mailbox does not hold."""
        ...

    async def get_chunk(self, fp: str, file_id: str, index: int) -> bytes | None: ...

    async def ack(self, fp: str, file_ids: list[str]) -> int:
        """Delete those of the mailbox's files; return how many there were."""
        ...

    async def purge(self, now: float, ttl: float) -> int:
        """Delete files whose first chunk came `ttl` seconds ago or more; return how many."""
        ...

    async def purge_unknown(self, fp: str) -> int:
        """Delete the mailbox's files under tags its owner never registered; return how many."""
        ...
