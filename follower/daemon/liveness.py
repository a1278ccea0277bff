"""Whether a follower runs for an identity: the lock it holds for life, and its pid.

    follower.lock         flock held by the live daemon: the only proof of life, so a dead or
                          zombie process, or a pid reused by another program, never counts
    follower-status.json  its status (`follower.daemon.state.FollowStatus`), which names its pid

Apart from the rest of the follower's state so that a command asking only "is one running?"
(`talk receive`, on every agent turn) loads no more than this.
"""

from __future__ import annotations

from pathlib import Path

from durable import daemon
from durable.locks import hold_for_life

__all__ = ["LOCK_FILE", "STATUS_FILE", "hold_lock", "running_pid"]

STATUS_FILE = "follower-status.json"
LOCK_FILE = "follower.lock"


def hold_lock(folder: Path) -> int | None:
    """Take the liveness lock for this process's lifetime; None if another follower has it."""
    return hold_for_life(folder / LOCK_FILE)


def running_pid(folder: Path) -> int | None:
    """The live follower's pid, or None when no follower holds the lock (-1: its status is unreadable)."""
    return daemon.running_pid(folder / LOCK_FILE, folder / STATUS_FILE)
