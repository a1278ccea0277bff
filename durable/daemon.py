"""What a talk daemon (the follower, an opencode door) and the command that starts it share.

A daemon holds a liveness lock for life (`durable.locks.hold_for_life`): the only proof that it
runs, so a dead or stopped process, or a pid reused by another program, never counts. Beside
the lock it keeps a status file (its pid and what it last did) and a rotated log. `talk`
starts it detached (`spawn`: a new session, no terminal) and stops it by pid (`stop`).
"""

from __future__ import annotations

import errno
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from durable.errors import TalkError
from durable.files import open_private, read_private, replace_file
from durable.locks import held_by_other

__all__ = [
    "START_TIMEOUT_S",
    "STATUS_BYTES",
    "STOP_TIMEOUT_S",
    "load_status",
    "running_pid",
    "save_status",
    "setup_logging",
    "spawn",
    "stop",
]

STATUS_BYTES = 4096
START_TIMEOUT_S = 15.0
STOP_TIMEOUT_S = 10.0


def setup_logging(path: Path, to_stderr: bool) -> None:
    """Log INFO and up to `path` (0600, rotated at 1 MiB, three kept), and to stderr if asked."""
    import logging
    import logging.handlers

    # The handler opens the log by name and would write through a planted link: refuse one first.
    os.close(open_private(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND))
    handlers: list[logging.Handler] = [
        logging.handlers.RotatingFileHandler(path, maxBytes=1024 * 1024, backupCount=3)]
    if to_stderr:
        handlers.append(logging.StreamHandler(sys.stderr))
    logging.basicConfig(level=logging.INFO, handlers=handlers, format="%(asctime)s %(levelname)s %(message)s")
    os.chmod(path, 0o600)


def save_status(path: Path, fields: dict[str, Any]) -> None:
    """Replace the status file; on a full disk, overwrite it in place instead.

    The file is padded to STATUS_BYTES, so rewriting it in place needs no new block: a daemon
    can still say why it stopped working when nothing else can be written.
    """
    import json

    data = json.dumps(fields, sort_keys=True).encode()
    body = data + b" " * max(0, STATUS_BYTES - 1 - len(data)) + b"\n"
    try:
        replace_file(path, body)
    except OSError as exc:
        if exc.errno not in (errno.ENOSPC, errno.EDQUOT) or not _overwrite_in_place(path, body):
            raise


def _overwrite_in_place(path: Path, body: bytes) -> bool:
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


def load_status(path: Path) -> dict[str, Any] | None:
    """The status a daemon saved, or None when there is none or it cannot be read."""
    import json

    try:
        raw = json.loads(read_private(path))
    except (OSError, ValueError, TalkError):
        return None
    return raw if isinstance(raw, dict) else None


def running_pid(lock: Path, status: Path) -> int | None:
    """The pid of the daemon holding `lock`, or None when none does; -1 when one does but its
    status does not say its pid."""
    if not held_by_other(lock):
        return None
    pid = (load_status(status) or {}).get("pid")
    return pid if isinstance(pid, int) and pid > 0 else -1


def spawn(argv: list[str], ready: Callable[[int], bool], what: str, log: Path,
          env: dict[str, str] | None = None) -> int:
    """Start `argv` detached (a new session, no terminal) and wait until `ready(pid)` says it
    holds its liveness lock; returns its pid.

    Raises:
        TalkError: it exited or did not get ready within START_TIMEOUT_S (with its log's last line).
    """
    import subprocess

    child = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL, start_new_session=True, close_fds=True, env=env)
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if ready(child.pid):
            return child.pid
        if child.poll() is not None:
            break
        time.sleep(0.02)
    tail = _last_line(log)
    raise TalkError(f"the {what} did not start{': ' + tail if tail else ''}; see {log}")


def _last_line(path: Path) -> str:
    try:
        lines = path.read_text(errors="replace").strip().splitlines()
    except OSError:
        return ""
    return lines[-1] if lines else ""


def stop(pids: list[int], running: Callable[[], bool], what: str) -> None:
    """Ask the daemons `pids` to stop (SIGTERM) and wait while `running()` says one still is.

    Raises:
        TalkError: one still runs after STOP_TIMEOUT_S.
    """
    import signal

    for pid in pids:
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + STOP_TIMEOUT_S
    while running():
        if time.monotonic() > deadline:
            raise TalkError(f"the {what} did not stop within {STOP_TIMEOUT_S:.0f} s")
        time.sleep(0.05)
