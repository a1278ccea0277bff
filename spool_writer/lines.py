"""NDJSON spool files: whole-line appends, rotation, and reading back complete lines.

The caller holds the spool lock. A line is complete once its '\\n' is in the file; a fragment
without one is a write that a crash or a full disk cut short. It is sealed into a line of its
own before the next append, which readers skip (`durable.ndjson` says why), so it can never
fuse with the next message into one unreadable line.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

from durable.files import fsync_dir, open_private, read_private
from durable.ndjson import append_to, complete_lines
from durable.printable import json_safe
from spool_writer.layout import generation, generations
from spool_writer.record import SpoolRecord

__all__ = ["read_from", "size_of"]

_CHUNK = 64 * 1024


def encode(record: SpoolRecord) -> bytes:
    """One NDJSON line. What JSON leaves raw inside strings and some readers take for a line
    break (U+2028, NEL) or a terminal for a command (C1) is escaped, so a line stays one line."""
    return json_safe(json.dumps(record, ensure_ascii=False)).encode() + b"\n"


def id_of(line: bytes) -> str | None:
    """The message id a spool line carries, or None for a line that is not a message."""
    try:
        obj = json.loads(line)
    except ValueError:
        return None
    msg_id = obj.get("id") if isinstance(obj, dict) else None
    return msg_id if isinstance(msg_id, str) else None


def append(path: Path, data: bytes, sync: bool = True) -> int:
    """Append `data` (whole lines) with one write; return where it starts, once it is on disk
    (without `sync`: once it is in the file, for a caller that syncs a batch with `sync_files`)."""
    created = not path.exists()
    fd = open_private(path, os.O_RDWR | os.O_APPEND | os.O_CREAT)
    try:
        at = append_to(fd, data)
        if sync:
            _sync(fd)
    finally:
        os.close(fd)
    if created:
        fsync_dir(path.parent)
    return at


def _sync(fd: int) -> None:
    """fdatasync where there is one (Linux): an append needs its bytes and size durable, no more."""
    sync = getattr(os, "fdatasync", os.fsync)
    sync(fd)


def sync_files(paths: list[Path]) -> None:
    """Make what was appended to `paths` without syncing durable, one fdatasync each."""
    for path in paths:
        fd = open_private(path, os.O_RDONLY)
        try:
            _sync(fd)
        finally:
            os.close(fd)


def _last_newline_before(fd: int, end: int) -> int:
    """Offset of the last '\\n' before `end`, or -1 if there is none."""
    while end > 0:
        start = max(0, end - _CHUNK)
        at = os.pread(fd, end - start, start).rfind(b"\n")
        if at >= 0:
            return start + at
        end = start
    return -1


def last_lines(path: Path) -> Iterator[bytes]:
    """The complete lines of `path` from its end backwards, read as they are asked for: a caller
    that stops after one line reads one line, however long the file is."""
    try:
        fd = open_private(path, os.O_RDONLY)
    except FileNotFoundError:
        return
    try:
        end = _last_newline_before(fd, os.fstat(fd).st_size) + 1
        while end > 0:
            start = _last_newline_before(fd, end - 1) + 1
            yield os.pread(fd, end - start, start)
            end = start
    finally:
        os.close(fd)


def tail_lines(path: Path) -> Iterator[bytes]:
    """`last_lines` of `path`, then of its rotated generations, newest first: a batch cut short
    may have written lines on both sides of a rotation, so its first lines can be in `.1`."""
    yield from last_lines(path)
    for older in generations(path):
        yield from last_lines(older)


def read_from(fd: int, offset: int) -> bytes:
    """Everything in the open file `fd` from `offset` to its end (it may be growing)."""
    parts = []
    while chunk := os.pread(fd, _CHUNK * 16, offset):
        parts.append(chunk)
        offset += len(chunk)
    return b"".join(parts)


def read_lines(path: Path) -> list[bytes]:
    """The complete lines of one file; none if it does not exist."""
    try:
        data = read_private(path)
    except FileNotFoundError:
        return []
    return complete_lines(data)[0]


FileState = tuple[int, int, int]


def state_of(st: os.stat_result) -> FileState:
    """(inode, size, modified in ns): what any append, rotation or replacement of a file changes.
    The spool's files and index only grow or are replaced, never rewritten in place."""
    return st.st_ino, st.st_size, st.st_mtime_ns


def file_state(path: Path) -> FileState | None:
    """`state_of` the file at `path`; None if it is missing."""
    try:
        return state_of(os.stat(path))
    except FileNotFoundError:
        return None


def size_of(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0


def rotate(path: Path, generations: int) -> None:
    """Shift `path` to `.1`, `.1` to `.2`, …; the generation past `generations` is dropped.

    Readers find the file they were in by its inode, so a rename never loses their place.
    """
    generation(path, generations).unlink(missing_ok=True)
    for n in range(generations - 1, 0, -1):
        src = generation(path, n)
        if src.exists():
            os.replace(src, generation(path, n + 1))
    os.replace(path, generation(path, 1))
    fsync_dir(path.parent)


def rotate_if_full(path: Path, max_bytes: int, generations: int, size: int | None = None) -> None:
    """Rotate `path` once it holds `max_bytes`; `size`: its size, when the caller just read it."""
    if (size_of(path) if size is None else size) >= max_bytes:
        rotate(path, generations)


def remove(paths: list[Path]) -> None:
    for path in paths:
        path.unlink(missing_ok=True)
    for folder in {p.parent for p in paths}:
        if folder.exists():
            fsync_dir(folder)
