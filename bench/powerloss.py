"""A simulated power loss for the processes of one bench identity: its disk as last synced.

A process killed by a signal loses nothing it wrote: the kernel's page cache outlives it. A power
loss (or a kernel crash) takes back every write that no fsync or fdatasync carried to the disk,
and the machine boots again with a new boot id. No bench can cut a real disk's power, so this
module keeps, beside each identity's folder (its `home`), a shadow of what that folder's disk
would hold, and the bench's children keep it up to date from the inside:

  bench/powerloss_site/sitecustomize.py, on the children's PYTHONPATH, calls `install_from_env`
  at start-up when SHADOW_ENV names a shadow folder. It wraps:
    os.fsync, os.fdatasync   after the real call, the synced file's bytes (all of them, read
                             through /proc/self/fd/N, whatever its name is by now) are copied
                             into the shadow;
    os.replace, os.rename    the shadow entry moves with the file; a file renamed before it was
                             ever synced moves nothing, so the target's shadow (the old file, or
                             none) is what a power loss brings back;
    os.unlink, os.remove     the shadow entry goes too;
  and points `durable.boot.BOOT_ID_FILE` at BOOT_ENV's file, which the bench rewrites with a new
  id at each power loss (`boot_id` is cached per process; every process of the side is killed
  by the loss and starts again).

`lose_power` then (the side's processes already killed) puts every file under `home` back to
its shadow copy, deletes every file that has none (never synced), and brings back a synced file
that went without a wrapped call.

The model, and where it is kinder or harsher than a real disk:
  - file contents roll back to the last sync of the file, by any process: exact;
  - renames and unlinks are durable at once (a real disk needs the folder synced, which the
    project does after each); creating a file and writing it without a sync leaves no file;
  - a sync's copy is taken after the real sync returns, so a process killed between the two
    rolls back as if the power went before its sync: never kinder than a disk;
  - SQLite databases (`KEPT_SUFFIXES`: channels.db and its WAL) sync from C, where no Python
    wrapper sees it, so they are kept as they were at the kill: every committed transaction
    is taken to be on the disk, which synchronous=NORMAL in WAL mode does not promise;
  - `snapshot` copies the whole folder into the shadow, as a sync(1) does: the bench calls it
    once the identities are set up, so what predates the soak survives every power loss.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import stat
import sys
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "BOOT_ENV", "HOME_ENV", "KEPT_SUFFIXES", "SHADOW_ENV", "SITE_DIR", "Disk", "Loss", "child_env",
    "install", "install_from_env", "new_boot", "wrappers",
]

SHADOW_ENV = "POWERLOSS_SHADOW"
HOME_ENV = "POWERLOSS_HOME"
BOOT_ENV = "POWERLOSS_BOOT_ID"
SITE_DIR = Path(__file__).resolve().parent / "powerloss_site"
KEPT_SUFFIXES = (".db", ".db-wal", ".db-shm", ".db-journal")
_TMP = ".shadowtmp"

# The real calls, taken before any wrapping: the shadow's own writes must not be shadowed.
_fsync = os.fsync
_fdatasync = os.fdatasync
_replace = os.replace
_rename = os.rename
_unlink = os.unlink
_remove = os.remove


@dataclass
class Loss:
    """What one power loss did to a folder's files."""

    restored: int = 0  # put back to the bytes last synced
    deleted: int = 0  # never synced: gone
    kept: int = 0  # unchanged since their last sync, or kept by the model (SQLite)


class Disk:
    """The shadow of one folder: `shadow/files` mirrors what the disk holds under `home`."""

    def __init__(self, home: Path, shadow: Path) -> None:
        self.home = os.path.realpath(home)
        self.files = Path(shadow) / "files"
        self.lock_path = Path(shadow) / "lock"

    def _rel(self, path: str) -> str | None:
        """`path` relative to the home, or None for a file elsewhere (or a deleted one)."""
        if path.endswith(" (deleted)"):
            return None
        folder, name = os.path.split(os.path.abspath(path))
        full = os.path.join(os.path.realpath(folder), name)
        rel = os.path.relpath(full, self.home)
        return None if rel == "." or rel.startswith("..") else rel

    def _locked(self) -> int:
        """An flock on the shadow: syncs of one file by two processes land in the order taken."""
        self.lock_path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        fcntl.flock(fd, fcntl.LOCK_EX)
        return fd

    def synced(self, fd: int) -> None:
        """The file open as `fd` was just synced: its bytes are what the disk holds now."""
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return  # a folder's sync: its renames and unlinks were counted as they happened
        link = f"/proc/self/fd/{fd}"
        rel = self._rel(os.readlink(link))
        if rel is None:
            return
        lock = self._locked()
        try:
            with open(link, "rb") as f:  # opened anew: `fd` may be write-only
                data = f.read()
            target = self.files / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            tmp = target.with_name(f"{target.name}.{os.getpid()}{_TMP}")
            out = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
            try:
                os.write(out, data)
            finally:
                os.close(out)
            _replace(tmp, target)
        finally:
            os.close(lock)

    def renamed(self, src: str, dst: str) -> None:
        old, new = self._rel(src), self._rel(dst)
        if old is None or new is None:
            return
        lock = self._locked()
        try:
            if (self.files / old).exists():
                (self.files / new).parent.mkdir(parents=True, exist_ok=True)
                _replace(self.files / old, self.files / new)
        finally:
            os.close(lock)

    def unlinked(self, path: str) -> None:
        rel = self._rel(path)
        if rel is None:
            return
        lock = self._locked()
        try:
            with contextlib.suppress(FileNotFoundError, IsADirectoryError):
                _unlink(self.files / rel)
        finally:
            os.close(lock)

    def snapshot(self) -> None:
        """Everything under the home is on the disk now (a sync(1))."""
        shutil.rmtree(self.files, ignore_errors=True)
        shutil.copytree(self.home, self.files, symlinks=True)

    def lose_power(self, kept: Callable[[str], bool] | None = None) -> Loss:
        """Every file under the home as the disk holds it (run it only once every process that
        writes there is dead). `kept(rel)`: files left as they are (default: SQLite's)."""
        keep = kept or (lambda rel: rel.endswith(KEPT_SUFFIXES))
        loss = Loss()
        seen: set[str] = set()
        for folder, _dirs, names in os.walk(self.home):
            for name in names:
                path = os.path.join(folder, name)
                rel = os.path.relpath(path, self.home)
                seen.add(rel)
                copy = self.files / rel
                if keep(rel):
                    loss.kept += 1
                elif not copy.exists():
                    _unlink(path)
                    loss.deleted += 1
                elif Path(path).read_bytes() == copy.read_bytes():
                    loss.kept += 1
                else:
                    shutil.copyfile(copy, path)  # in place: the file keeps its inode and mode
                    loss.restored += 1
        for folder, _dirs, names in os.walk(self.files):
            for name in names:
                rel = os.path.relpath(os.path.join(folder, name), self.files)
                if rel not in seen and not name.endswith(_TMP) and not keep(rel):
                    target = Path(self.home) / rel
                    target.parent.mkdir(parents=True, exist_ok=True)
                    shutil.copyfile(self.files / rel, target)
                    target.chmod(0o600)
                    loss.restored += 1
        return loss


def new_boot(boot_file: Path) -> str:
    """Write a new boot id where the side's processes read theirs: the machine booted again."""
    boot = str(uuid.uuid4())
    boot_file.write_text(boot + "\n")
    return boot


def child_env(env: dict[str, str], home: Path, shadow: Path, boot_file: Path) -> dict[str, str]:
    """`env` for a process of the side whose disk `shadow` keeps."""
    path = os.pathsep.join(p for p in (str(SITE_DIR), env.get("PYTHONPATH", "")) if p)
    return {**env, "PYTHONPATH": path, SHADOW_ENV: str(shadow), HOME_ENV: str(home),
            BOOT_ENV: str(boot_file)}


def _fd_of(fd: Any) -> int:
    return fd if isinstance(fd, int) else int(fd.fileno())


def wrappers(disks: list[Disk]) -> dict[str, Callable[..., None]]:
    """The `os` functions, by name, that make each of `disks` follow this process's syncs,
    renames and unlinks (each disk takes what falls under its home)."""

    def fsync(fd: Any) -> None:
        _fsync(fd)
        for disk in disks:
            disk.synced(_fd_of(fd))

    def fdatasync(fd: Any) -> None:
        _fdatasync(fd)
        for disk in disks:
            disk.synced(_fd_of(fd))

    def moved(real: Callable[..., None]) -> Callable[..., None]:
        def move(src: Any, dst: Any, **kwargs: Any) -> None:
            real(src, dst, **kwargs)
            if not kwargs:
                for disk in disks:
                    disk.renamed(os.fsdecode(src), os.fsdecode(dst))
        return move

    def gone(real: Callable[..., None]) -> Callable[..., None]:
        def remove(path: Any, **kwargs: Any) -> None:
            real(path, **kwargs)
            if not kwargs:
                for disk in disks:
                    disk.unlinked(os.fsdecode(path))
        return remove

    return {"fsync": fsync, "fdatasync": fdatasync, "replace": moved(_replace), "rename": moved(_rename),
            "unlink": gone(_unlink), "remove": gone(_remove)}


def install(disk: Disk, boot_file: Path) -> None:
    """Wrap this process's syncs, renames and unlinks so `disk` follows them, and read the boot
    id from `boot_file`."""
    for name, wrapper in wrappers([disk]).items():
        setattr(os, name, wrapper)
    import durable.boot

    durable.boot.BOOT_ID_FILE = boot_file


def install_from_env() -> None:
    """`install` as SHADOW_ENV, HOME_ENV and BOOT_ENV say; nothing if SHADOW_ENV is unset."""
    shadow = os.environ.get(SHADOW_ENV)
    if not shadow:
        return
    home, boot = os.environ.get(HOME_ENV), os.environ.get(BOOT_ENV)
    if not home or not boot:
        sys.exit(f"powerloss: {SHADOW_ENV} needs {HOME_ENV} and {BOOT_ENV} too")
    install(Disk(Path(home), Path(shadow)), Path(boot))
