"""The cursor every door reads a session's spool with, so each message is handed on once.

State: the byte offset reached, the inode of the file it is in, a hash of that file's first
bytes (how many is remembered), and the last `RECENT` ids handed on. A changed inode means the
writer rotated: the rest of the old generation (found by inode) is read, then the newer files.
A file shorter than the offset was truncated; a different head, even at the same length, was
truncated and refilled: both are read again from the start, and the recent ids keep what was
already handed on from being handed on twice. A last line without its '\\n' is still being
written and waits for the next read.

`plan` and `advance` decide all of that from values alone; `read_new` and `CursorReader` are
the I/O around them. `take` saves the new state, atomically and under the state file's lock,
*before* it returns the records: a reader that dies while handing them on loses them rather
than handing them on again on every turn (a Codex Stop hook would loop forever).
"""

from __future__ import annotations

import json
import os
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from durable.digests import blake2b
from durable.errors import UserError
from durable.files import ensure_private_dir, open_private, read_json, write_json
from durable.ndjson import complete_lines
from spool_writer import handed as handed_log
from spool_writer import lines
from spool_writer.layout import flocked, generations
from spool_writer.peek import CURSOR_VERSION as VERSION
from spool_writer.peek import LOCK_SUFFIX
from spool_writer.record import SpoolRecord

__all__ = ["RECENT", "CursorReader", "CursorState", "load_state", "lock_path", "message_of", "read_new"]

HEAD_BYTES = 64
RECENT = 512


def head_hash(head: bytes) -> str:
    return blake2b(head, digest_size=16).hexdigest()


EMPTY_HASH = head_hash(b"")


@dataclass(frozen=True)
class CursorState:
    inode: int | None = None
    offset: int = 0
    head_len: int = 0
    head_hash: str = EMPTY_HASH
    recent: tuple[str, ...] = ()
    skipped: int = 0  # lines passed over because they are not messages, over the cursor's life

    def to_json(self) -> dict[str, Any]:
        return {"v": VERSION, "inode": self.inode, "offset": self.offset, "head_len": self.head_len,
                "head_hash": self.head_hash, "recent": list(self.recent), "skipped": self.skipped}

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> CursorState:
        inode = obj["inode"]
        return cls(None if inode is None else int(inode), int(obj["offset"]), int(obj["head_len"]),
                   str(obj["head_hash"]), tuple(map(str, obj["recent"])), int(obj.get("skipped", 0)))


@dataclass(frozen=True)
class FileView:
    """One spool file as found: its inode, its size and its first min(HEAD_BYTES, size) bytes."""

    inode: int
    size: int
    head: bytes


@dataclass(frozen=True)
class Read:
    file: int  # index into the views given to `plan`
    offset: int


@dataclass(frozen=True)
class Chunk:
    """The bytes of one file from `start` to its end; `last` marks the current file."""

    data: bytes
    start: int
    last: bool


@dataclass(frozen=True)
class Taken:
    records: list[SpoolRecord]
    lines: list[bytes]  # the raw line of each record, for moving unread mail elsewhere
    state: CursorState
    skipped: int = 0


def resume_at(state: CursorState, view: FileView) -> int:
    """Where to go on reading the file the cursor is in: its offset, or 0 if the file was rewritten."""
    if view.size < state.offset:
        return 0  # truncated
    if head_hash(view.head[:state.head_len]) != state.head_hash:
        return 0  # truncated and refilled, perhaps to the very same length
    return state.offset


def plan(state: CursorState, views: Sequence[FileView]) -> list[Read]:
    """Which files to read from where; `views` are one spool's files, oldest first, current last."""
    at = next((i for i in reversed(range(len(views))) if views[i].inode == state.inode), None)
    if at is None:  # a new cursor, or its generation is gone: everything, deduplicated by recent ids
        return [Read(i, 0) for i in range(len(views))]
    return [Read(at, resume_at(state, views[at]))] + [Read(i, 0) for i in range(at + 1, len(views))]


def message_of(line: bytes) -> SpoolRecord | None:
    """The message a line holds, or None for a line that is not a JSON object with a string id.

    Only the id is checked: the other fields are as the file has them, whatever the type says
    (see `spool_writer.record`).
    """
    try:
        obj = json.loads(line)
    except ValueError:
        return None
    if not isinstance(obj, dict) or not isinstance(obj.get("id"), str):
        return None
    return cast(SpoolRecord, obj)


def advance(
    state: CursorState, chunks: Sequence[Chunk], current: FileView, keep: int = RECENT
) -> Taken:
    """The new messages in `chunks` (read as `plan` said) and the state after them."""
    recent = deque(state.recent, maxlen=keep)
    seen = set(recent)
    records: list[SpoolRecord] = []
    raw: list[bytes] = []
    skipped = 0
    for chunk in chunks:
        complete, used = complete_lines(chunk.data)
        if not chunk.last and used < len(chunk.data):
            skipped += 1  # a torn line in an old generation: nobody will finish it
        for line in complete:
            record = message_of(line)
            if record is None:
                skipped += 1
            elif record["id"] not in seen:
                seen.add(record["id"])
                recent.append(record["id"])
                records.append(record)
                raw.append(line)
    last = chunks[-1]
    offset = last.start + complete_lines(last.data)[1]
    head = (current.head[:last.start] + last.data)[:min(HEAD_BYTES, offset)]
    new = CursorState(current.inode, offset, len(head), head_hash(head), tuple(recent),
                      state.skipped + skipped)
    return Taken(records, raw, new, skipped)


def _open_view(path: Path) -> tuple[int, FileView] | None:
    try:
        fd = open_private(path, os.O_RDONLY)
    except FileNotFoundError:
        return None
    st = os.fstat(fd)
    return fd, FileView(st.st_ino, st.st_size, os.pread(fd, HEAD_BYTES, 0))


def _inode(path: Path) -> int | None:
    try:
        return path.stat().st_ino
    except FileNotFoundError:
        return None


def _open_files(spool_file: Path, inode: int | None) -> list[tuple[int, FileView]]:
    """The open files to read: the current one, and the generations too when the cursor left it.

    The writer rotates without waiting for readers, so the generations are listed after the
    current file is opened and the listing is retried until no rotation happened meanwhile.
    """
    while True:
        current = _open_view(spool_file)
        if current is None:
            return []  # no spool yet, or a rotation is between its rename and its new file
        if current[1].inode == inode:
            return [current]
        older = [o for path in reversed(generations(spool_file)) if (o := _open_view(path)) is not None]
        opened = [*older, current]
        if _inode(spool_file) == current[1].inode:
            return opened
        for fd, _ in opened:
            os.close(fd)


def read_new(spool_file: Path, state: CursorState, keep: int = RECENT) -> Taken | None:
    """What a reader at `state` has not had yet from `spool_file` and its generations.

    None if there is no spool file; the state is not saved (see `CursorReader.take`).
    """
    opened = _open_files(spool_file, state.inode)
    if not opened:
        return None
    try:
        views = [view for _, view in opened]
        chunks = [Chunk(lines.read_from(opened[r.file][0], r.offset), r.offset, r.file == len(views) - 1)
                  for r in plan(state, views)]
    finally:
        for fd, _ in opened:
            os.close(fd)
    return advance(state, chunks, views[-1], keep)


def lock_path(state_file: Path) -> Path:
    """The state file is replaced on every save, so the lock lives in a file of its own."""
    return state_file.with_name(state_file.name + LOCK_SUFFIX)


def load_state(state_file: Path) -> CursorState:
    data = read_json(state_file, None)
    if data is None:
        return CursorState()
    try:
        return CursorState.from_json(data)
    except (KeyError, TypeError, ValueError) as exc:
        raise UserError(
            f"cursor {state_file} is damaged ({exc!r}); delete it to read the spool from the start "
            "(recent messages may then be shown again)"
        ) from exc


class CursorReader:
    """Reads one spool for one reader; any number of processes may share the same state file."""

    def __init__(self, spool_file: Path, state_file: Path, keep: int = RECENT,
                 handed: Path | None = None, sid: str = "") -> None:
        """With `handed`, what `take` returns is first written to that hand-over log."""
        self.spool_file = spool_file
        self.state_file = state_file
        self.keep = keep
        self.handed = handed
        self.sid = sid

    def take(self) -> list[SpoolRecord]:
        """The messages not handed on yet, oldest first; the cursor is saved before they are returned."""
        if not (self.spool_file.exists() or generations(self.spool_file)):
            return []  # no spool (yet, or any more): leave no lock file behind
        ensure_private_dir(self.state_file.parent, "spool folder")
        with flocked(lock_path(self.state_file)) as fd:
            os.utime(fd)  # the spool was read now, even if nothing was new: `gc` is not to retire it
            state = load_state(self.state_file)
            taken = read_new(self.spool_file, state, self.keep)
            if taken is None:
                return []
            if self.handed is not None:
                handed_log.record(self.handed, taken.records, self.sid)
            if taken.state != state:
                write_json(self.state_file, taken.state.to_json())
            return taken.records

    def peek(self) -> Taken:
        """What `take` would return now, without moving the cursor."""
        state = load_state(self.state_file)
        return read_new(self.spool_file, state, self.keep) or Taken([], [], state)

    def count_unread(self) -> int:
        return len(self.peek().records)
