"""Is an agent's host process still running? A pid alone can be reused, so its start time too.

The start time is field 22 of /proc/<pid>/stat (clock ticks after boot): a new process that
inherits the pid has a different one. Without /proc only `kill(pid, 0)` is left, which cannot
tell a reused pid apart.
"""

from __future__ import annotations

import os
from pathlib import Path

from durable.errors import UserError

__all__ = ["alive", "has_proc", "start_time"]

PROC = Path("/proc")
_STATE, _START = 0, 19  # fields 3 and 22, counted from the one after the ")" closing field 2
_GONE = (b"Z", b"X")  # a zombie has exited; only its parent has not reaped it yet


def has_proc() -> bool:
    return (PROC / "self" / "stat").exists()


def start_time(pid: int) -> int | None:
    """The start time of a running `pid`, or None if no such process runs."""
    if pid <= 0:
        return None
    try:
        raw = (PROC / str(pid) / "stat").read_bytes()
    except OSError:
        return None
    fields = raw[raw.rfind(b")") + 1:].split()  # field 2 (the name) may hold spaces and ")"
    if len(fields) <= _START or fields[_STATE] in _GONE:
        return None
    return int(fields[_START])


def alive(pid: int, pid_start: int | None) -> bool:
    """Whether the process registered as (`pid`, `pid_start`) still runs."""
    if pid <= 0:
        return False
    if has_proc():
        start = start_time(pid)
        return start is not None and (pid_start is None or start == pid_start)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # it exists, owned by someone else
    return True


def identify(pid: int) -> int | None:
    """The start time to register `pid` with (None without /proc); the process must be running."""
    start = start_time(pid) if has_proc() else None
    if not alive(pid, start):
        raise UserError(
            f"process {pid} is not running; pass the pid of the agent's host program with --pid"
        )
    return start
