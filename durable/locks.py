"""flock helpers: a lock held around a change, and a lock held for life as the proof a daemon runs.

Every lock lives in a file of its own, opened without following links; closing the descriptor
(or the process ending, however it ends) releases it, so no lock outlives its holder.
"""

from __future__ import annotations

import _thread
import contextlib
import fcntl
import os
import time
from collections.abc import Iterator
from pathlib import Path

from durable import held
from durable.files import open_private

__all__ = [
    "FOLDER_LOCK",
    "LIFE_LOCK_PATIENCE_S",
    "folder_locked",
    "held_by_other",
    "hold_for_life",
    "kept_locked",
    "locked",
]

LIFE_LOCK_PATIENCE_S = 2.0
# Lock files `kept_locked` keeps open at once. One is kept per peer written to in an Olm session,
# so without a bound a long-lived follower would keep one open for every contact it ever answered,
# toward the process's limit of open files (1,024 by default), past which nothing opens at all.
KEPT_MOST = 64


@contextlib.contextmanager
def locked(path: Path, shared: bool = False, wait: bool = True) -> Iterator[int]:
    """Hold an flock on `path` (created 0600) for the block; yields the lock's descriptor.
    With `wait` False, a lock another holder has is not waited for.

    Raises:
        UserError: `path` is a symbolic link.
        BlockingIOError: `wait` is False and another holder has the lock.
        OSError: the lock file cannot be opened or created.
    """
    fd = open_private(path, os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(fd, (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | (0 if wait else fcntl.LOCK_NB))
        yield fd
    finally:
        os.close(fd)


# The lock files `kept_locked` keeps open: per path, the hold of the process that opened it.
_KEPT: dict[Path, _KeptLock] = {}


class _KeptLock:
    """One lock file held open by this process (`kept_locked`); a plain class, not a generator:
    it is taken on every message."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.pid = os.getpid()
        self.fd = open_private(path, os.O_RDWR | os.O_CREAT)
        self.turn = _thread.allocate_lock()

    def __enter__(self) -> int:
        self.turn.acquire()
        try:
            if self.fd < 0:  # closed to make room (`_close_idle`) after `kept_locked` handed it out
                self.fd = open_private(self.path, os.O_RDWR | os.O_CREAT)
            fcntl.flock(self.fd, fcntl.LOCK_EX)
            if os.fstat(self.fd).st_nlink == 0:
                os.close(self.fd)
                if _KEPT.get(self.path) is self:  # whatever happens next, not held out again
                    del _KEPT[self.path]
                self.fd = open_private(self.path, os.O_RDWR | os.O_CREAT)
                _KEPT[self.path] = self
                fcntl.flock(self.fd, fcntl.LOCK_EX)
        except BaseException:
            self.turn.release()
            raise
        return self.fd

    def __exit__(self, *exc: object) -> None:
        try:
            fcntl.flock(self.fd, fcntl.LOCK_UN)
            if _KEPT.get(self.path) is not self:  # made room for others meanwhile: not kept open
                self._close()
        finally:
            self.turn.release()

    def close_if_idle(self) -> bool:
        """Close the file unless a thread holds the lock or waits for it; whether it was closed."""
        if not self.turn.acquire(blocking=False):
            return False
        try:
            self._close()
        finally:
            self.turn.release()
        return True

    def _close(self) -> None:
        if self.fd >= 0:
            fd, self.fd = self.fd, -1
            os.close(fd)


def kept_locked(path: Path) -> _KeptLock:
    """`locked` (exclusive, waiting), for a lock this process takes on every message (a send's):
    the file stays open between holds, so a hold costs the flock calls, not an open and a close
    as well. An flock belongs to the open file, which every thread shares, so the process's
    threads take turns on a mutex first; a child process opens its own (a forked descriptor
    shares the parent's lock). A lock file unlinked meanwhile (its folder removed) is opened
    anew: other processes lock the file now at `path`, not the one this process holds open.

    Raises (on entering the block):
        UserError: `path` is a symbolic link.
        OSError: the lock file cannot be opened or created.
    """
    kept = _KEPT.get(path)
    if kept is None or kept.pid != os.getpid():
        if len(_KEPT) >= KEPT_MOST:
            _close_idle()
        kept = _KEPT[path] = _KeptLock(path)
    return kept


def _close_idle() -> None:
    """Make room in `_KEPT`: close the kept locks opened first that no thread holds, until one
    fewer than `KEPT_MOST` are left (a lock still in use stays, above the bound if need be)."""
    for path, kept in list(_KEPT.items()):
        if len(_KEPT) < KEPT_MOST:
            return
        # One a parent process opened too: this process's copy of it is what is closed.
        if kept.close_if_idle() and _KEPT.get(path) is kept:
            del _KEPT[path]


def hold_for_life(path: Path, patience_s: float = LIFE_LOCK_PATIENCE_S) -> int | None:
    """Take `path`'s flock for the rest of this process: the proof that it lives (a dead or
    stopped process, or a pid reused by another program, holds nothing). None when another
    process holds it. Tries for `patience_s`: a process that only looks (`held_by_other`) holds
    the lock for an instant, and a daemon starting at that instant must not give up."""
    fd = open_private(path, os.O_RDWR | os.O_CREAT)
    deadline = time.monotonic() + patience_s
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return fd
        except BlockingIOError:
            if time.monotonic() >= deadline:
                os.close(fd)
                return None
            time.sleep(0.01)


def held_by_other(path: Path) -> bool:
    """Whether a live process holds `path`'s lock (`hold_for_life`); see `durable.held`.

    Raises:
        LocalFileRefused: `path` is a symbolic link.
    """
    return held.held_by_other(path, lambda p: open_private(Path(p), os.O_RDONLY))


FOLDER_LOCK = ".lock"


def folder_locked(folder: Path) -> contextlib.AbstractContextManager[int]:
    """Hold a folder's own lock (its `.lock` file) around a read-modify-write of its files:
    several talk processes may share one folder (a receive while an add runs)."""
    return locked(folder / FOLDER_LOCK)
