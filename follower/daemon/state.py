"""A follower's files in its identity folder; whether it is alive is `follower.daemon.liveness`'s.

    follower.json         what the user asked for: peers, poll interval, push on or off
    follower-status.json  what the daemon reports: pid, since, last contact, last error, counts
                          (rewritten when it changes: `FollowStatus.due`)
    follower.lock         flock held by the live daemon: the only proof of life, so a dead or
                          zombie process, or a pid reused by another program, never counts
    follower.log          the daemon's log (rotated)
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from durable import daemon
from durable.files import read_json, write_json
from follower.daemon.liveness import STATUS_FILE, hold_lock, running_pid

__all__ = ["LOG_FILE", "FollowConfig", "FollowStatus", "StatusFile", "following", "hold_lock", "running_pid"]

CONFIG_FILE = "follower.json"
LOG_FILE = "follower.log"
DEFAULT_INTERVAL_S = 30.0
# How stale the file may let the fields that move with every drain be (the last contact, the
# count delivered): `talk status` shows them to the second, and a rewrite with its fsync per
# drain would cost live mail a millisecond each.
HEARTBEAT_S = 1.0
HEARTBEAT = frozenset({"last_contact", "delivered"})


@dataclass
class FollowConfig:
    peers: list[str] = field(default_factory=list)
    interval: float = DEFAULT_INTERVAL_S
    push: bool = True
    every: bool = False  # every contact, those made later too; `peers` is then unused

    @classmethod
    def load(cls, folder: Path) -> FollowConfig:
        raw: dict[str, Any] = read_json(folder / CONFIG_FILE, {})
        return cls(
            peers=list(raw.get("peers", [])),
            interval=float(raw.get("interval", DEFAULT_INTERVAL_S)),
            push=bool(raw.get("push", True)),
            every=raw.get("every") is True,
        )

    def save(self, folder: Path) -> None:
        write_json(folder / CONFIG_FILE, asdict(self))


def following(peers: list[str], every: bool) -> str:
    """What a follower takes mail from, in words."""
    return "every contact" if every else ", ".join(peers) or "no contact"


@dataclass
class FollowStatus:
    pid: int = 0
    relay: str = ""
    peers: list[str] = field(default_factory=list)
    every: bool = False  # every contact, whatever `peers` says
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
        raw = daemon.load_status(folder / STATUS_FILE)
        if raw is None:
            return None
        known = {k: v for k, v in raw.items() if k in cls.__dataclass_fields__}
        return cls(**known)

    def save(self, folder: Path) -> None:
        """Replace the status file (in place on a full disk: `durable.daemon.save_status`)."""
        daemon.save_status(folder / STATUS_FILE, asdict(self))

    def due(self, saved: FollowStatus | None, saved_at: float, now: float) -> bool:
        """Whether this status should replace `saved`, written at `saved_at`: at once when a field
        other than the heartbeat changed (the first contact too: a sender waits for it), the
        heartbeat alone once the file is HEARTBEAT_S old, never when nothing changed."""
        if saved is None:
            return True
        # Field by field, not through `asdict`, which copies both deeply: this runs after every drain.
        changed = {k for k in self.__dataclass_fields__ if getattr(self, k) != getattr(saved, k)}
        if not changed:
            return False
        if not changed <= HEARTBEAT or saved.last_contact is None:
            return True
        return now - saved_at >= HEARTBEAT_S


class StatusFile:
    """A follower's status file, written from either of its threads when what it says changed
    (`FollowStatus.due`). What is written and what is then taken to be in the file are one copy,
    made before the write: the other thread may change the status while the file is written (its
    sync takes milliseconds), and that change must still read as not written, or `talk status`
    would not show it until some other field changed."""

    def __init__(self, folder: Path, clock: Callable[[], float] = time.monotonic) -> None:
        self.folder = folder
        self._clock = clock
        self._lock = threading.Lock()
        self._saved: tuple[FollowStatus, float] | None = None  # what the file holds, and since when

    def save(self, status: FollowStatus, final: bool = False) -> None:
        """Write `status` if it is due (`final`: if anything changed at all).

        Raises:
            OSError: it could not be written; the next save tries again.
        """
        with self._lock:
            now = self._clock()
            saved, saved_at = self._saved or (None, 0.0)
            if not (status.due(saved, saved_at, now) or (final and saved != status)):
                return
            shown = replace(status, peers=list(status.peers))
            shown.save(self.folder)
            self._saved = (shown, now)
