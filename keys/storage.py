"""The identity folder's own files: atomic JSON writes, mode 0600, and a folder lock.

Several talk processes may share one identity (a receive while an add runs), so every
read-modify-write of a store file happens under `locked()`.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from keys.errors import UserError


def ensure_private_dir(path: Path) -> None:
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    os.chmod(path, 0o700)


def write_json(path: Path, obj: Any) -> None:
    """Replace `path` atomically: a crash leaves the old file or the new one, never half."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    data = json.dumps(obj, indent=2, sort_keys=True).encode() + b"\n"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)


def read_json(path: Path, default: Any) -> Any:
    try:
        with open(path, "rb") as f:
            return json.load(f)
    except FileNotFoundError:
        return default
    except (OSError, ValueError) as exc:
        raise UserError(f"cannot read {path.name} in {path.parent}: {exc}; restore it from a backup") from exc


@contextlib.contextmanager
def locked(folder: Path) -> Iterator[None]:
    """Hold the identity folder's lock for a read-modify-write."""
    fd = os.open(folder / ".lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def append_records(path: Path, records: list[dict[str, Any]]) -> None:
    """Append JSON lines under the file's own lock, durably: the caller acts on them next."""
    if not records:
        return
    data = b"".join(json.dumps(r, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"
                    for r in records)
    fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        os.write(fd, seal_torn_tail(fd) + data)
        os.fsync(fd)
    finally:
        os.close(fd)


def seal_torn_tail(fd: int) -> bytes:
    """A newline if the log ends in half a line (a crash mid-append), else nothing.

    The half line then stands alone, unreadable and skipped, instead of swallowing the record
    appended after it. Call with the log's lock held and the fd opened for reading.
    """
    size = os.fstat(fd).st_size
    return b"\n" if size and os.pread(fd, 1, size - 1) != b"\n" else b""


def read_records(path: Path) -> list[dict[str, Any]]:
    """Every whole JSON line of an append log; a torn last line (a crash mid-append) is skipped."""
    try:
        with open(path, "rb") as f:
            fcntl.flock(f.fileno(), fcntl.LOCK_SH)
            raw = f.read()
    except FileNotFoundError:
        return []
    records = []
    for line in raw.split(b"\n"):
        try:
            item = json.loads(line)
        except ValueError:
            continue
        if isinstance(item, dict):
            records.append(item)
    return records
