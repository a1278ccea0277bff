"""The identity folder's own files: atomic JSON writes, mode 0600, and a folder lock.

Several talk processes may share one identity (a receive while an add runs), so every
read-modify-write of a store file happens under `locked()`.

Another local user must not be able to steer these files: TALK_HOME and every folder below it
must be ours and writable by nobody else (`check_private_dir`), and no file is opened through
a symbolic link (`open_private`: O_NOFOLLOW), so a link planted in a shared folder cannot
send decrypted mail or keys into a file of the planter's choosing. A replacement is written
to a fresh temporary file (O_EXCL) beside its target and renamed over it, which replaces a
link rather than following it.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import secrets
import stat
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from keys.errors import UserError


def check_private_dir(path: Path, what: str = "folder", follow: bool = False) -> None:
    """Refuse a folder that another user owns or could write to, or (unless `follow`, for a
    TALK_HOME the user linked elsewhere) that is a symbolic link.

    Raises:
        UserError: saying which folder and what to do about it.
    """
    st = os.stat(path) if follow else os.lstat(path)
    if stat.S_ISLNK(st.st_mode):
        raise UserError(f"the {what} {path} is a symbolic link; talk keeps its files only in real "
                        "folders: remove the link")
    if not stat.S_ISDIR(st.st_mode):
        raise UserError(f"the {what} {path} is not a folder; move it aside")
    if st.st_uid != os.geteuid():
        raise UserError(f"the {what} {path} belongs to another user (uid {st.st_uid}); another user "
                        "could read or redirect your mail there: use a folder of your own (TALK_HOME)")
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise UserError(f"the {what} {path} is writable by other users, who could plant files in "
                        f"it; run `chmod 700 {path}`")


def ensure_private_dir(path: Path, what: str = "folder", follow: bool = False) -> None:
    """Create `path` 0700 if it is missing; either way it must pass `check_private_dir`."""
    try:
        path.mkdir(parents=True, exist_ok=True, mode=0o700)
    except FileExistsError as exc:  # a file, or a file where a parent folder should be
        raise UserError(f"the {what} {path} cannot be a folder: {exc.filename} is a file; "
                        "move it aside or set TALK_HOME elsewhere") from exc
    check_private_dir(path, what, follow)
    if os.stat(path).st_mode & 0o777 != 0o700:
        os.chmod(path, 0o700)


def open_private(path: Path, flags: int, mode: int = 0o600) -> int:
    """`os.open` that never follows a symbolic link at `path` (and is closed on exec).

    Raises:
        UserError: `path` is a symbolic link.
        OSError: as os.open.
    """
    try:
        return os.open(path, flags | os.O_NOFOLLOW | os.O_CLOEXEC, mode)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise UserError(f"{path} is a symbolic link; talk never reads or writes its files through "
                            "one: remove the link (and check who planted it)") from exc
        raise


def read_private(path: Path) -> bytes:
    """The bytes of `path`, never through a symbolic link (FileNotFoundError if missing)."""
    fd = open_private(path, os.O_RDONLY)
    with os.fdopen(fd, "rb") as f:
        return f.read()


def replace_file(path: Path, data: bytes) -> None:
    """Replace `path` atomically and durably: a crash leaves the old file or the new one."""
    # A fresh name, created exclusively: a leftover or planted file of that name is never reused.
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    fd = open_private(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)  # rename replaces a link at `path`; it never writes through it
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def sweep_temp_files(folder: Path) -> int:
    """Remove the temporary files of `replace_file` whose writer is gone (killed mid-write);
    a live writer's are left alone. Returns how many went."""
    removed = 0
    for tmp in folder.glob(".*.tmp"):
        parts = tmp.name.split(".")
        try:
            pid = int(parts[-3])
            os.kill(pid, 0)
            continue  # its writer still runs
        except (ValueError, IndexError):
            continue  # not one of ours
        except ProcessLookupError:
            pass
        except PermissionError:
            continue  # alive, someone else's
        tmp.unlink(missing_ok=True)
        removed += 1
    return removed


def write_json(path: Path, obj: Any) -> None:
    """Replace `path` atomically: a crash leaves the old file or the new one, never half."""
    replace_file(path, json.dumps(obj, indent=2, sort_keys=True).encode() + b"\n")


def read_json(path: Path, default: Any) -> Any:
    try:
        return json.loads(read_private(path))
    except FileNotFoundError:
        return default
    except (OSError, ValueError) as exc:
        raise UserError(f"cannot read {path.name} in {path.parent}: {exc}; restore it from a backup") from exc


@contextlib.contextmanager
def locked(folder: Path) -> Iterator[None]:
    """Hold the identity folder's lock for a read-modify-write."""
    fd = open_private(folder / ".lock", os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


LIFE_LOCK_PATIENCE_S = 2.0


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
    """Whether a live process holds `path`'s lock (`hold_for_life`). The look takes a shared lock
    for an instant, so two lookers never make each other see a holder."""
    try:
        fd = open_private(path, os.O_RDONLY)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


def json_lines(records: list[dict[str, Any]]) -> bytes:
    """`records` as the lines of an append log (what `read_records` reads back)."""
    return b"".join(json.dumps(r, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"
                    for r in records)


def append_records(path: Path, records: list[dict[str, Any]]) -> None:
    """Append JSON lines under the file's own lock, durably: the caller acts on them next."""
    if not records:
        return
    data = json_lines(records)
    fd = open_private(path, os.O_RDWR | os.O_APPEND | os.O_CREAT)
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


def read_records(path: Path, tail_bytes: int | None = None) -> list[dict[str, Any]]:
    """Every whole JSON line of an append log; a torn last line (a crash mid-append) is skipped.
    With `tail_bytes`, only the lines in that many bytes at the end (the newest), however long
    the log has grown."""
    try:
        fd = open_private(path, os.O_RDONLY)
    except FileNotFoundError:
        return []
    with os.fdopen(fd, "rb") as f:
        fcntl.flock(f.fileno(), fcntl.LOCK_SH)
        start = 0 if tail_bytes is None else max(0, os.fstat(f.fileno()).st_size - tail_bytes)
        f.seek(start)
        raw = f.read()
    if start:
        raw = raw[raw.find(b"\n") + 1:]  # the first line is cut
    records = []
    for line in raw.split(b"\n"):
        try:
            item = json.loads(line)
        except ValueError:
            continue
        if isinstance(item, dict):
            records.append(item)
    return records
