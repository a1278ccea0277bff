"""Where the spool keeps its files, the modes they are kept in, and the lock that orders changes.

    <identity>/spool/                 0700
        .lock                         flock(LOCK_EX) around every change to the folder
        delivered.log                 ids delivered whole, and deliveries a crash cut short
        sessions.json                 the registry of agent sessions
        inbox.ndjson[.1, .2, …]       mail that came while no session was live
        sessions/<sid>.ndjson[.1, …]  each registered session's own copy (newest first)
        sessions/<sid>.cursor         that session's read position (cursor.py)

Files are 0600, folders 0700, and neither is ever used through a symbolic link (see
`durable.files`). A session id becomes part of a file name, so it is checked before use.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from durable.errors import UserError
from durable.files import check_private_dir, ensure_private_dir
from durable.locks import FOLDER_LOCK, kept_locked, locked
from spool_writer.handed import HANDED_FILE
from spool_writer.peek import CURSOR_SUFFIX, INDEX_FILE, SESSIONS, SPOOL_SUFFIX, safe_sid

__all__ = ["SpoolLayout", "check_sid", "count_lines", "flocked", "generations", "oldest_first"]

DEFAULT_MAX_BYTES = 8 * 1024 * 1024
DEFAULT_GENERATIONS = 5
INBOX = "inbox"
_SPOOL_NAME = re.compile(r"(?P<sid>[A-Za-z0-9_-][A-Za-z0-9._-]{0,127})\.ndjson(?:\.(?P<gen>[0-9]+))?")


def check_sid(sid: str) -> str:
    """A session id names files, so it may hold only safe characters and never start with '.'."""
    if not safe_sid(sid):
        raise UserError(
            f"session id {sid!r} is not usable: give 1-128 letters, digits, '.', '_' or '-', "
            "not starting with '.'"
        )
    return sid


@dataclass(frozen=True)
class SpoolLayout:
    root: Path

    @property
    def lock(self) -> Path:
        return self.root / FOLDER_LOCK

    @property
    def index(self) -> Path:
        return self.root / INDEX_FILE

    @property
    def registry(self) -> Path:
        return self.root / "sessions.json"

    @property
    def handed(self) -> Path:
        """Where doors log what they handed to an agent (see `spool_writer.handed`)."""
        return self.root / HANDED_FILE

    @property
    def inbox(self) -> Path:
        return self.root / (INBOX + SPOOL_SUFFIX)

    @property
    def sessions_dir(self) -> Path:
        return self.root / SESSIONS

    def session_file(self, sid: str) -> Path:
        return self.sessions_dir / (check_sid(sid) + SPOOL_SUFFIX)

    def cursor_file(self, sid: str) -> Path:
        return self.sessions_dir / (check_sid(sid) + CURSOR_SUFFIX)

    def target_name(self, spool_file: Path) -> str:
        """A spool file's stable name (`inbox`, `sessions/<sid>`): rotation renames files, not this."""
        rel = spool_file.relative_to(self.root).as_posix()
        return rel.removesuffix(SPOOL_SUFFIX)

    def session_files_on_disk(self) -> set[str]:
        """Sids that have spool files, registered or not (a crash can orphan them)."""
        try:
            names = os.listdir(self.sessions_dir)
        except FileNotFoundError:
            return set()
        return {m["sid"] for m in map(_SPOOL_NAME.fullmatch, names) if m is not None}

    def ensure(self) -> None:
        private_dir(self.root)
        private_dir(self.sessions_dir)


def generation(spool_file: Path, n: int) -> Path:
    return spool_file.with_name(f"{spool_file.name}.{n}")


def generations(spool_file: Path) -> list[Path]:
    """The rotated generations that exist, newest (`.1`) first; gaps left by a crash are skipped."""
    prefix = spool_file.name + "."
    try:
        names = os.listdir(spool_file.parent)
    except FileNotFoundError:
        return []
    numbers = sorted(int(n[len(prefix):]) for n in names
                     if n.startswith(prefix) and n[len(prefix):].isdigit())
    return [generation(spool_file, n) for n in numbers]


def oldest_first(spool_file: Path) -> list[Path]:
    """Every file of one spool in the order its lines were written: generations, then the current."""
    return [*reversed(generations(spool_file)), spool_file]


def count_lines(spool_file: Path) -> int:
    """Whole lines in a spool and its generations (what waits in an inbox no session reads)."""
    total = 0
    for path in oldest_first(spool_file):
        try:
            with open(path, "rb") as f:
                total += sum(chunk.count(b"\n") for chunk in iter(lambda: f.read(1 << 16), b""))
        except FileNotFoundError:
            continue
    return total


def private_dir(path: Path) -> None:
    ensure_private_dir(path, "spool folder")


@contextlib.contextmanager
def flocked(path: Path, shared: bool = False, kept: bool = False) -> Iterator[int]:
    """Hold an flock on `path` (created 0600) in a private folder; yields the lock's descriptor.
    `kept` (exclusive only): for a writer that takes it for every message it delivers, the lock
    file stays open between holds (`durable.locks.kept_locked`), so a hold costs no open."""
    check_private_dir(path.parent, "spool folder")  # every change and read starts here
    if kept and shared:
        raise ValueError("a kept lock is exclusive")
    with kept_locked(path) if kept else locked(path, shared) as fd:
        yield fd
