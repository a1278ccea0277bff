"""A doorbell: a named pipe by which a door tells the follower "I handed mail over".

The follower sends a `delivered` receipt for each message a door hands to an agent. Polling the
hand-over log for that would wake an idle follower many times a second; a ring wakes it only when
there is something to send. The pipe carries no data that matters (a byte, to be read and
dropped), so nothing any local process writes into it can do more than cost one look at the log.

Ringing never blocks and never fails the door: with no follower listening, opening the pipe for
writing fails at once (ENXIO), and the follower's slower upkeep still reads the log.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import threading
from collections.abc import Callable
from pathlib import Path

__all__ = ["Doorbell", "bell_path"]

BELL_FILE = "follower.bell"


def bell_path(handed_log: Path) -> Path:
    # Named apart from every spool file pattern (*.ndjson*): a reader that globs the spool must
    # never open a pipe, where a read would wait for a writer.
    return handed_log.with_name(BELL_FILE)


def ring(bell: Path) -> None:
    """Wake the follower listening on `bell`, if there is one; never raises."""
    try:
        fd = os.open(bell, os.O_WRONLY | os.O_NONBLOCK | os.O_NOFOLLOW)
    except OSError:
        return  # no follower listening (ENXIO), no bell yet, or not a pipe we made
    try:
        if stat.S_ISFIFO(os.fstat(fd).st_mode):
            with contextlib.suppress(BlockingIOError):  # a full pipe already rings
                os.write(fd, b".")
    finally:
        os.close(fd)


class Doorbell(threading.Thread):
    """Calls `on_ring` each time the bell rings; a daemon thread for the follower's lifetime."""

    def __init__(self, bell: Path, on_ring: Callable[[], None]) -> None:
        super().__init__(name="doorbell", daemon=True)
        self.bell = bell
        self.on_ring = on_ring

    def make(self) -> None:
        try:
            os.mkfifo(self.bell, 0o600)
        except FileExistsError:
            if not stat.S_ISFIFO(os.lstat(self.bell).st_mode):
                os.unlink(self.bell)  # something else sits where the bell goes: replace it
                os.mkfifo(self.bell, 0o600)

    def run(self) -> None:
        try:
            self.make()
            # Held open for writing by ourselves too, so reads block instead of seeing EOF
            # whenever the last door closes its end.
            fd = os.open(self.bell, os.O_RDWR | os.O_NOFOLLOW)
        except OSError:
            return  # no bell: the follower's regular upkeep still reads the log
        while True:
            try:
                if os.read(fd, 512):
                    self.on_ring()
            except OSError as exc:
                if exc.errno != errno.EINTR:
                    return
