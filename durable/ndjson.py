"""Append logs of JSON lines: one write per append, and one policy for a torn last line.

A line is whole once its '\\n' is in the file. A crash or a full disk can leave the last line
without one. Before the next append, that fragment is sealed: a '\\n' is written in front of
the new lines (`seal_torn_tail`), so the fragment stands alone as a line readers skip
(`parse_records`). Of the three things one could do this is the one that loses nothing and
never glues two records into one line: cutting the fragment off throws away bytes that may be
a whole record short of only its newline, and appending behind it fuses the next record
into an unreadable line. Readers skip any line that is not a JSON object, and never treat a
last line without its '\\n' as whole: its writer may still be writing it.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from durable.files import open_private

__all__ = [
    "append_records",
    "append_to",
    "complete_lines",
    "json_lines",
    "parse_records",
    "read_after",
    "read_records",
    "seal_torn_tail",
]


def json_lines(records: list[dict[str, Any]]) -> bytes:
    """`records` as the lines of an append log (what `read_records` reads back)."""
    return b"".join(json.dumps(r, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"
                    for r in records)


def seal_torn_tail(fd: int) -> bytes:
    """A newline if the log ends in half a line (a crash mid-append), else nothing (see the
    module docstring). Call with the log's lock held and the fd opened for reading."""
    size = os.fstat(fd).st_size
    return b"\n" if size and os.pread(fd, 1, size - 1) != b"\n" else b""


def append_to(fd: int, data: bytes) -> int:
    """Append `data` (whole lines) to the log open at `fd` (O_APPEND, the caller holding its
    lock) with one write, after sealing a torn tail; returns the offset `data` starts at. A
    failed or short write is cut off again, so it cannot become a torn tail itself. Not synced.

    Raises:
        OSError: the write failed (ENOSPC also for a short write).
    """
    size = os.fstat(fd).st_size
    seal = seal_torn_tail(fd)
    try:
        written = os.write(fd, seal + data)
    except OSError:
        os.ftruncate(fd, size)
        raise
    if written != len(seal) + len(data):
        os.ftruncate(fd, size)
        raise OSError(errno.ENOSPC, "short write: the disk is full; free some space")
    return size + len(seal)


def append_records(path: Path, records: list[dict[str, Any]]) -> None:
    """Append JSON lines under the file's own lock, durably: the caller acts on them next.

    Raises:
        UserError: `path` is a symbolic link.
        OSError: the log cannot be opened or written.
    """
    if not records:
        return
    fd = open_private(path, os.O_RDWR | os.O_APPEND | os.O_CREAT)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        append_to(fd, json_lines(records))
        os.fsync(fd)
    finally:
        os.close(fd)


def complete_lines(data: bytes) -> tuple[list[bytes], int]:
    """Split `data` into complete lines (each ending in '\\n') and how many bytes they span."""
    end = data.rfind(b"\n") + 1
    return data[:end].splitlines(keepends=True), end


def parse_records(lines: Iterable[bytes]) -> list[dict[str, Any]]:
    """The JSON objects among `lines`; a sealed fragment or any other odd line is skipped."""
    records = []
    for line in lines:
        try:
            item = json.loads(line)
        except ValueError:
            continue
        if isinstance(item, dict):
            records.append(item)
    return records


def _read(path: Path, where: Callable[[int], int]) -> tuple[bytes, int]:
    """The bytes of the log from `where(its size)` to its end, read under its shared lock, and
    that start; FileNotFoundError if there is no log."""
    fd = open_private(path, os.O_RDONLY)
    with os.fdopen(fd, "rb") as f:
        fcntl.flock(f.fileno(), fcntl.LOCK_SH)
        start = where(os.fstat(f.fileno()).st_size)
        f.seek(start)
        return f.read(), start


def read_records(path: Path, tail_bytes: int | None = None) -> list[dict[str, Any]]:
    """Every record in the whole lines of an append log (none if it does not exist). With
    `tail_bytes`, only the lines in that many bytes at the end (the newest), however long the
    log has grown."""
    try:
        raw, start = _read(path, lambda size: 0 if tail_bytes is None else max(0, size - tail_bytes))
    except FileNotFoundError:
        return []
    if start:
        raw = raw[raw.find(b"\n") + 1:]  # the first line is cut
    return parse_records(complete_lines(raw)[0])


def read_after(path: Path, offset: int) -> tuple[list[dict[str, Any]], int]:
    """The records in the whole lines after `offset`, and the offset after the last whole line
    (none, 0 if there is no log). An offset past the end means the log was emptied since: it is
    read from the start."""
    try:
        raw, start = _read(path, lambda size: 0 if offset > size else offset)
    except FileNotFoundError:
        return [], 0
    whole, end = complete_lines(raw)
    return parse_records(whole), start + end
