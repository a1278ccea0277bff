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
