"""Private files: folders only we can write, opens that never follow a link, atomic replacement.

Another local user must not be able to steer talk's files: TALK_HOME and every folder below it
must be ours and writable by nobody else (`check_private_dir`), and no file is opened through
a symbolic link (`open_private`: O_NOFOLLOW), so a link planted in a shared folder cannot
send decrypted mail or keys into a file of the planter's choosing. A replacement is written
to a fresh temporary file (O_EXCL) beside its target and renamed over it, which replaces a
link rather than following it.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path
from typing import Any

from durable.errors import LocalFileRefused

__all__ = [
    "check_private_dir",
    "damaged",
    "ensure_private_dir",
    "erase_file",
    "fsync_dir",
    "open_private",
    "read_json",
    "read_private",
    "replace_file",
    "sweep_temp_files",
    "write_json",
]


def check_private_dir(path: Path, what: str = "folder", follow: bool = False) -> None:
    """Refuse a folder that another user owns or could write to, or (unless `follow`, for a
    TALK_HOME the user linked elsewhere) that is a symbolic link.

    Raises:
        LocalFileRefused: saying which folder and what to do about it.
    """
    st = os.stat(path) if follow else os.lstat(path)
    if stat.S_ISLNK(st.st_mode):
        raise LocalFileRefused(f"the {what} {path} is a symbolic link; talk keeps its files only in real "
                        "folders: remove the link")
    if not stat.S_ISDIR(st.st_mode):
        raise LocalFileRefused(f"the {what} {path} is not a folder; move it aside")
    if st.st_uid != os.geteuid():
        raise LocalFileRefused(f"the {what} {path} belongs to another user (uid {st.st_uid}); another user "
                        "could read or redirect your mail there: use a folder of your own (TALK_HOME)")
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise LocalFileRefused(f"the {what} {path} is writable by other users, who could plant files in "
                        f"it; run `chmod 700 {path}`")


def ensure_private_dir(path: Path, what: str = "folder", follow: bool = False) -> None:
    """Create `path` 0700 if it is missing; either way it must pass `check_private_dir`.

    Raises:
        LocalFileRefused: `path` cannot be a folder, or fails `check_private_dir`.
    """
    try:  # the common case, one look: a real folder of ours, 0700 already, passes every check
        st = os.stat(path) if follow else os.lstat(path)
        if stat.S_ISDIR(st.st_mode) and st.st_uid == os.geteuid() and stat.S_IMODE(st.st_mode) == 0o700:
            return
    except OSError:
        pass  # missing, or not reachable: made, or refused with its reason, below
    try:
        path.mkdir(parents=True, exist_ok=True, mode=0o700)
    except FileExistsError as exc:  # a file, or a file where a parent folder should be
        raise LocalFileRefused(f"the {what} {path} cannot be a folder: {exc.filename} is a file; "
                        "move it aside or set TALK_HOME elsewhere") from exc
    check_private_dir(path, what, follow)
    if os.stat(path).st_mode & 0o777 != 0o700:
        os.chmod(path, 0o700)


def open_private(path: Path, flags: int, mode: int = 0o600) -> int:
    """`os.open` that never follows a symbolic link at `path` (and is closed on exec).

    Raises:
        LocalFileRefused: `path` is a symbolic link.
        OSError: as os.open.
    """
    try:
        return os.open(path, flags | os.O_NOFOLLOW | os.O_CLOEXEC, mode)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise LocalFileRefused(f"{path} is a symbolic link; talk never reads or writes its files through "
                            "one: remove the link (and check who planted it)") from exc
        raise


def read_private(path: Path) -> bytes:
    """The bytes of `path`, never through a symbolic link (FileNotFoundError if missing)."""
    fd = open_private(path, os.O_RDONLY)
    with os.fdopen(fd, "rb") as f:
        return f.read()


def fsync_dir(path: Path) -> None:
    """Make a create, rename or unlink in `path` durable, not only the files' bytes."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def erase_file(path: Path) -> bool:
    """Overwrite `path` with zeros, sync, then unlink it: for a file that holds keys, whose bytes
    must go and not only its name (the caller syncs the folder). Whether it was there.
    A symbolic link is refused, never followed."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        return False
    try:
        os.write(fd, b"\0" * os.fstat(fd).st_size)
        os.fsync(fd)
    finally:
        os.close(fd)
    path.unlink(missing_ok=True)
    return True


def replace_file(path: Path, data: bytes, mode: int = 0o600, sync: bool = True) -> None:
    """Replace `path` atomically and durably: after a crash the old file or the new one is there,
    never half of one, and once this returns the new one survives a power loss (the file's
    bytes and the rename in its folder are both synced). Without `sync`, only a kill of the
    process is survived: a power loss may leave the old file, or an empty or partial new one."""
    # A fresh name, created exclusively: a leftover or planted file of that name is never reused.
    # (os.urandom, not `secrets`: that module's imports cost a millisecond on every start.)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{os.urandom(4).hex()}.tmp")
    fd = open_private(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            if sync:
                f.flush()
                os.fsync(f.fileno())
        os.replace(tmp, path)  # rename replaces a link at `path`; it never writes through it
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    if sync:
        fsync_dir(path.parent)


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


def write_json(path: Path, obj: Any, compact: bool = False) -> None:
    """Replace `path` with `obj` as JSON, atomically and durably (`replace_file`). `compact`: on
    one line, for a file rewritten on every message (json encodes an indented document in
    Python, a compact one in C, several times faster)."""
    import json

    text = json.dumps(obj, separators=(",", ":")) if compact else json.dumps(obj, indent=2, sort_keys=True)
    replace_file(path, text.encode() + b"\n")


def read_json(path: Path, default: Any, erasable: bool = False) -> Any:
    """The JSON in `path`, or `default` if there is no such file. `erasable`: a record that is
    erased when done with (`erase_file`); while it is being erased, or if a kill left it erased
    but not yet unlinked, it holds only zeros, and reads as no file, not as a damaged one.

    Raises:
        LocalFileRefused: the file cannot be read or is not JSON (nor, if `erasable`, zeros).
    """
    import json

    try:
        data = read_private(path)
        return default if erasable and data and not data.strip(b"\0") else json.loads(data)
    except FileNotFoundError:
        return default
    except (OSError, ValueError) as exc:
        raise damaged(path, exc) from exc


def damaged(path: Path, exc: Exception) -> LocalFileRefused:
    """The error for a state file that cannot be read or does not parse: what to do about it."""
    return LocalFileRefused(f"{path.name} in {path.parent} is damaged or unreadable ({exc}); restore it "
                            "from a backup, or move it aside and run the command again")
