"""A follower's files in its identity folder, and whether it is alive.

    follower.json         what the user asked for: peers, poll interval, push on or off
    follower-status.json  what the daemon reports: pid, since, last contact, last error, counts
    follower.lock         flock held by the live daemon: the only proof of life, so a dead or
                          zombie process, or a pid reused by another program, never counts
    follower.log          the daemon's log (rotated)
"""

from __future__ import annotations

import errno
import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from durable.files import open_private, read_json, replace_file, write_json
from durable.locks import held_by_other, hold_for_life

CONFIG_FILE = "follower.json"
STATUS_FILE = "follower-status.json"
LOCK_FILE = "follower.lock"
LOG_FILE = "follower.log"
DEFAULT_INTERVAL_S = 30.0
STATUS_BYTES = 4096


def overwrite_in_place(path: Path, body: bytes) -> bool:
    """Write `body` over the start of the existing file if it fits in the room the file has."""
    try:
        fd = open_private(path, os.O_WRONLY)
    except OSError:
        return False
    try:
        size = os.fstat(fd).st_size
        if len(body) > size:
            return False
        os.pwrite(fd, body.rstrip(b"\n").ljust(size - 1) + b"\n", 0)
        return True
    except OSError:
        return False
    finally:
        os.close(fd)


@dataclass
class FollowConfig:
    peers: list[str] = field(default_factory=list)
    interval: float = DEFAULT_INTERVAL_S
    push: bool = True

    @classmethod
    def load(cls, folder: Path) -> FollowConfig:
        raw: dict[str, Any] = read_json(folder / CONFIG_FILE, {})
        return cls(
            peers=list(raw.get("peers", [])),
            interval=float(raw.get("interval", DEFAULT_INTERVAL_S)),
            push=bool(raw.get("push", True)),
        )

    def save(self, folder: Path) -> None:
        write_json(folder / CONFIG_FILE, asdict(self))


@dataclass
class FollowStatus:
    pid: int = 0
    relay: str = ""
    peers: list[str] = field(default_factory=list)
    since: float = 0.0
    last_contact: float | None = None
    last_error: str | None = None
    last_error_at: float | None = None
    push: str = "off"  # connected | connecting | off
    delivered: int = 0
    refused: int = 0
    republished_at: float | None = None  # when the relay was found without our keys, and given them

    @classmethod
    def load(cls, folder: Path) -> FollowStatus | None:
        raw = read_json(folder / STATUS_FILE, None)
        if not isinstance(raw, dict):
            return None
        known = {k: v for k, v in raw.items() if k in cls.__dataclass_fields__}
        return cls(**known)

    def save(self, folder: Path) -> None:
        """Replace the status file; on a full disk, overwrite it in place instead.

        The file is padded to STATUS_BYTES, so rewriting it in place needs no new block: the
        follower can still say why it stopped taking mail when nothing else can be written.
        """
        path = folder / STATUS_FILE
        data = json.dumps(asdict(self), sort_keys=True).encode()
        body = data + b" " * max(0, STATUS_BYTES - 1 - len(data)) + b"\n"
        try:
            replace_file(path, body)
        except OSError as exc:
            if exc.errno not in (errno.ENOSPC, errno.EDQUOT) or not overwrite_in_place(path, body):
                raise


def hold_lock(folder: Path) -> int | None:
    """Take the liveness lock for this process's lifetime; None if another follower has it."""
    return hold_for_life(folder / LOCK_FILE)


def is_running(folder: Path) -> bool:
    return held_by_other(folder / LOCK_FILE)


def running_pid(folder: Path) -> int | None:
    """The live follower's pid, or None when no follower holds the lock."""
    if not is_running(folder):
        return None
    status = FollowStatus.load(folder)
    return status.pid if status is not None and status.pid else -1
