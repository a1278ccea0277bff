"""Held mail: messages kept aside, not spooled, until a person releases or drops them.

Mail is held when its sender's policy says `hold` or when it comes faster than the sender's
receive rate. Held mail expires (24 h by default) with an `expired` receipt to its sender.

One file per held message, `held/SENDER/ID.BYTES.json`, so a hold costs the same however much
is held: one listing of the sender's own folder (which the cap keeps small) says whether the
message is held already and how many messages and bytes the sender has held, reading and
stat-ing no file, and a release or an expiry is one unlink. One file for all
held mail, read and rewritten on every hold, made each hold slower than the last and let a
contact whose mail is held slow everyone's mail queued behind it. An append log would need
compaction and an index kept in step between the follower and `talk held`; the folder is that
index, and creating a file (well under a millisecond) costs less than the sync a hold needs
anyway. The JSON is compact and UTF-8, so a held message takes about the room of its text.

Each sender may have at most `most` messages (and `HELD_MAX_BYTES`) held: past that, `hold`
raises `HeldFull`, and the caller refuses the message with a receipt saying why, so a contact
cannot fill the disk within the expiry. A file's modification time is set to when it was held:
expiry reads no file, only the folder (so a copy of the folder that does not keep times, as
`cp -r` without `-p`, starts the copied mail's 24 h again).

Crash safety. A hold writes a temporary file, syncs it and renames it into place (then syncs
the folder), under the identity's folder lock: killed at any point, the message is held once
or not at all, and a message not held comes again from the relay (it is acked only later).
A leftover temporary file is swept when its sender's folder is next counted. Mail held by
older versions sits in one `held.json`: it is read as it is, and moved into files (each
written before the old file loses it) by the next hold or removal.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from durable.files import (
    ensure_private_dir,
    fsync_dir,
    read_json,
    read_private,
    replace_file,
    sweep_temp_files,
    write_json,
)
from durable.locks import folder_locked
from durable.message_ids import resolve
from keys.encoding import is_hex32

__all__ = ["HELD_DIR", "HELD_FILE", "HELD_MAX", "HELD_MAX_BYTES", "HELD_MAX_ENV", "HeldBox", "HeldFull",
           "over_cap"]

HELD_DIR = "held"
HELD_FILE = "held.json"  # where versions before one file per message kept all held mail
HELD_MAX = 200  # messages held per sender; the rest are refused with a receipt
HELD_MAX_BYTES = 16 * 1024 * 1024  # bytes held per sender, however few the messages
HELD_MAX_ENV = "TALK_HELD_MAX"
SUFFIX = ".json"


class HeldFull(Exception):
    """The sender has its most mail held here; `str()` is the reason its receipt gives."""


def over_cap(count: int, size: int, adding: int, most: int, most_bytes: int = HELD_MAX_BYTES) -> str | None:
    """Why one more message of `adding` bytes does not fit beside `count` held ones of `size`
    bytes in all; None when it fits."""
    if count >= most:
        return (f"the recipient already holds {count} of your messages (at most {most}) until "
                "a person releases them; this one was refused: send it again once they do")
    if size + adding > most_bytes:
        return (f"the recipient already holds {size // 1024} KiB of your messages (at most "
                f"{most_bytes // 1024} KiB) until a person releases them; this one was refused: "
                "send it again once they do")
    return None


def held_max() -> int:
    """The per-sender cap: TALK_HELD_MAX if set to a positive whole number, else HELD_MAX."""
    try:
        value = int(os.environ.get(HELD_MAX_ENV, ""))
    except ValueError:
        return HELD_MAX
    return value if value > 0 else HELD_MAX


def _encode(entry: dict[str, Any]) -> bytes:
    return json.dumps(entry, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"


def _name(msg_id: str, size: int) -> str:
    """A held message's file name: its id and its bytes, so a listing alone gives both."""
    return f"{msg_id}.{size}{SUFFIX}"


def _parse(name: str) -> tuple[str, int] | None:
    """(id, bytes) from a held message's file name; None for any other name."""
    msg_id, _, size = name.removesuffix(SUFFIX).partition(".")
    if not (name.endswith(SUFFIX) and is_hex32(msg_id) and size.isascii() and size.isdigit()):
        return None
    return msg_id, int(size)


class HeldBox:
    def __init__(self, folder: Path, most: int | None = None) -> None:
        self.folder = folder
        self.root = folder / HELD_DIR
        self.legacy = folder / HELD_FILE
        self.most = held_max() if most is None else most

    def hold(self, record: dict[str, Any], reason: str) -> bool:
        """Keep `record` aside; False if it is held already.

        Raises:
            HeldFull: its sender has the most mail held here already (the reason says so).
            ValueError: the record's id or sender is not a 32-hex id.
        """
        msg_id, sender = record.get("id"), record.get("from")
        if not (is_hex32(msg_id) and is_hex32(sender)):
            raise ValueError("a held message needs a 32-hex id and sender")
        held_ns = time.time_ns()
        data = _encode({"record": record, "reason": reason, "held_at": held_ns / 1e9})
        folder = self.root / str(sender)
        with folder_locked(self.folder):
            self._migrate()
            listed = self._listing(folder)
            if msg_id in listed:
                return False
            refusal = over_cap(len(listed), sum(listed.values()), len(data), self.most)
            if refusal is not None:
                raise HeldFull(refusal)
            self._write(folder / _name(str(msg_id), len(data)), data, held_ns)
        return True

    def all(self) -> dict[str, dict[str, Any]]:
        """Every held message: id → {"record", "reason", "held_at"}."""
        held: dict[str, dict[str, Any]] = dict(self._legacy_entries())
        for msg_id, path in self._files():
            entry = self._read(path)
            if entry is not None:
                held[msg_id] = entry
        return held

    def entries(self, ids: list[str]) -> dict[str, dict[str, Any]]:
        """The entries of these ids that are held (reading only those)."""
        wanted = set(ids)
        held = {i: e for i, e in self._legacy_entries() if i in wanted}
        for msg_id, path in self._files():
            entry = self._read(path) if msg_id in wanted else None
            if entry is not None:
                held[msg_id] = entry
        return held

    def ids(self) -> list[str]:
        """The held messages' ids, reading no message."""
        return list(dict.fromkeys([*(i for i, _ in self._legacy_entries()), *(i for i, _ in self._files())]))

    def pick(self, which: str) -> list[str]:
        """Ids named by `which`: "all", or an id or unambiguous prefix of one (`message_ids`).

        Raises:
            UserError: `which` is no id, or a prefix of several.
            NotFound: no held message has that id.
        """
        ids = self.ids()
        if which == "all":
            return ids
        return [resolve(which, ids, "held message", "`talk held` lists them")]

    def remove(self, ids: list[str]) -> list[dict[str, Any]]:
        """Take these out of the box; returns their entries (those still there)."""
        wanted = set(ids)
        taken: list[dict[str, Any]] = []
        with folder_locked(self.folder):
            self._migrate()
            touched = set()
            for msg_id, path in self._files():
                if msg_id not in wanted:
                    continue
                entry = self._read(path)
                path.unlink(missing_ok=True)
                touched.add(path.parent)
                if entry is not None:
                    taken.append(entry)
            for folder in touched:
                fsync_dir(folder)
            taken += self._drop_legacy(wanted)
        return taken

    def expired(self, now: float, hours: float) -> list[str]:
        """The ids held `hours` or longer at `now` (reading no message: the files' times)."""
        limit = hours * 3600
        gone = [i for i, e in self._legacy_entries() if now - float(e["held_at"]) >= limit]
        for msg_id, path in self._files():
            try:
                held_at = path.stat().st_mtime_ns / 1e9
            except FileNotFoundError:
                continue  # released meanwhile
            if now - held_at >= limit:
                gone.append(msg_id)
        return gone

    def stamp(self) -> tuple[tuple[str, int, int], ...]:
        """Changes when held mail comes or goes (the folders' and the old file's times), so a
        reader that keeps the box in view reads it again only then."""
        marks = []
        for path in (self.legacy, self.root, *self._folders()):
            try:
                st = os.stat(path)
            except FileNotFoundError:
                continue
            marks.append((path.name, st.st_mtime_ns, st.st_size))
        return tuple(marks)

    def _folders(self) -> list[Path]:
        try:
            with os.scandir(self.root) as it:
                return [self.root / e.name for e in it
                        if is_hex32(e.name) and e.is_dir(follow_symlinks=False)]
        except FileNotFoundError:
            return []

    def _files(self) -> Iterator[tuple[str, Path]]:
        for folder in self._folders():
            try:
                with os.scandir(folder) as it:
                    names = [e.name for e in it]
            except FileNotFoundError:
                continue
            for name in names:
                parsed = _parse(name)
                if parsed is not None:
                    yield parsed[0], folder / name

    def _listing(self, folder: Path) -> dict[str, int]:
        """The messages held from the sender of `folder`: id → bytes, from their names alone.
        A temporary file a killed hold left behind is swept on the way."""
        try:
            names = os.listdir(folder)
        except FileNotFoundError:
            return {}
        listed = dict(filter(None, map(_parse, names)))
        if any(name.endswith(".tmp") for name in names):
            sweep_temp_files(folder)
        return listed

    def _write(self, path: Path, data: bytes, held_ns: int) -> None:
        """Put one held message in place, durably (`replace_file`), its modification time set to
        when it was held (`held_ns`), which is what expiry reads."""
        fresh = not path.parent.is_dir()
        if fresh:
            ensure_private_dir(self.root, "held mail folder")
            ensure_private_dir(path.parent, "held mail folder")
        replace_file(path, data)
        os.utime(path, ns=(held_ns, held_ns))  # unsynced: a power loss leaves the write's own time
        if fresh:
            fsync_dir(self.root)
            fsync_dir(self.folder)

    @staticmethod
    def _read(path: Path) -> dict[str, Any] | None:
        """One held entry; None when it went meanwhile or is not an entry (never ours whole)."""
        try:
            entry = json.loads(read_private(path))
        except FileNotFoundError:
            return None
        except (OSError, ValueError):
            return None
        if not isinstance(entry, dict) or not isinstance(entry.get("record"), dict):
            return None
        return entry

    def _legacy_entries(self) -> Iterator[tuple[str, dict[str, Any]]]:
        if not self.legacy.exists():
            return
        held: dict[str, Any] = read_json(self.legacy, {})
        for msg_id, entry in held.items():
            if isinstance(entry, dict) and isinstance(entry.get("record"), dict):
                yield msg_id, entry

    def _migrate(self) -> None:
        """Move mail an older version held into files (with the folder lock held): each file is
        written before the old file lets its entry go, so a kill in between leaves the entry in
        both places, which readers see once (the file's), and the next call finishes the move."""
        if not self.legacy.exists():
            return
        moved = []
        for msg_id, entry in self._legacy_entries():
            sender = entry["record"].get("from")
            if not (is_hex32(msg_id) and is_hex32(sender)):
                continue  # not a name a file can have: it stays where it is
            folder = self.root / str(sender)
            if msg_id not in self._listing(folder):
                data = _encode(entry)
                held_ns = int(float(entry.get("held_at", time.time())) * 1e9)
                self._write(folder / _name(msg_id, len(data)), data, held_ns)
            moved.append(msg_id)
        self._drop_legacy(set(moved))

    def _drop_legacy(self, ids: set[str]) -> list[dict[str, Any]]:
        """Take `ids` out of the old file (removed once empty); returns their entries."""
        if not ids or not self.legacy.exists():
            return []
        held: dict[str, Any] = read_json(self.legacy, {})
        taken = [held.pop(i) for i in list(held) if i in ids]
        if taken:
            if held:
                write_json(self.legacy, held)
            else:
                self.legacy.unlink()
                fsync_dir(self.folder)
        return [t for t in taken if isinstance(t, dict)]
