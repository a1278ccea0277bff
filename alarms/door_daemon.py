"""A daemon door: a long-lived process that hands a host's sessions their mail (opencode, Qwen
Code), with the files it keeps in the identity folder and how it runs.

Files, each named `alarm-<name><suffix>`:

    .lock         flock held by the live door: the only proof of life
    .json         status: pid and what the door reports
    .outbox.json  mail taken from the spool and not yet settled by the host (`alarms.outbox`)
    .log          the door's log (rotated)

A host's own status module names its doors and shows their status; the door runs with `serve`.
"""

from __future__ import annotations

import logging
import signal
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from durable import daemon
from durable.locks import hold_for_life

__all__ = ["DaemonFiles", "Door", "serve"]


@dataclass(frozen=True)
class DaemonFiles:
    folder: Path  # the identity's folder
    name: str  # what follows "alarm-": the host, and for a door per session its id

    def _path(self, suffix: str) -> Path:
        return self.folder / f"alarm-{self.name}{suffix}"

    @property
    def lock(self) -> Path:
        return self._path(".lock")

    @property
    def status(self) -> Path:
        return self._path(".json")

    @property
    def outbox(self) -> Path:
        return self._path(".outbox.json")

    @property
    def log(self) -> Path:
        return self._path(".log")

    def running_pid(self) -> int | None:
        """The live door's pid, or None; -1 if alive but its status is unreadable."""
        return daemon.running_pid(self.lock, self.status)


class Door(Protocol):
    def run(self) -> None:
        """Hand mail on until `halt`."""

    def halt(self) -> None:
        """Ask `run` to return (called from a signal handler)."""


def serve(files: DaemonFiles, door: Callable[[], Door], log: logging.Logger, busy: str) -> int:
    """Run the door `door()` makes until SIGTERM or SIGINT, holding its lock for life; 0, also
    when another process already holds the lock (it serves: `busy` says so in the log).
    The door is made only once the lock is held: a second one must not touch the files."""
    if hold_for_life(files.lock) is None:
        log.info("%s; exiting", busy)
        return 0
    running = door()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: running.halt())
    running.run()
    return 0
