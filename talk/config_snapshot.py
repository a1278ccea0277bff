"""What `talk setup` saw in each file a host's install writes (`Host.paths()`), so that
`talk setup --undo` can leave every one as it was: the same bytes, or absent where it was absent.

Per path it keeps what was there before the first setup (`Entry.before`) and what the latest
setup left (`Entry.after`). Undo, after uninstalling, decides per path (`restore_action`, pure):

- unchanged since setup left it: put back what was there before, whatever the uninstall wrote
  (it may leave what the host wrote for talk, as Codex's trust records in config.toml);
- changed since: put it back only when what the uninstall left parses to the same thing as the
  saved file (JSON or TOML equal: the uninstall rewrote it in its own layout), delete it when it
  was absent and now holds nothing; otherwise the user's change stays and undo says so.

A second setup keeps the first one's `before`; it trusts the first one's `after` only if the file
still holds it (else someone changed the file between the two, and undo falls back to parsing).
Folders: one absent before is removed if empty, one there before is made again if it went.
"""

from __future__ import annotations

import base64
import json
import os
import tomllib
from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

from alarms.host_files import write_file

__all__ = ["ABSENT", "Entry", "Kind", "Restore", "Seen", "apply", "equivalent", "load_entries", "look",
           "remember", "restore_action", "save_entries"]


class Kind(StrEnum):
    FILE = "file"
    DIR = "dir"
    ABSENT = "absent"


@dataclass(frozen=True)
class Seen:
    """One path as found: a file's bytes and mode, a folder, or nothing."""

    kind: Kind
    data: bytes | None = None
    mode: int | None = None


ABSENT = Seen(Kind.ABSENT)


@dataclass(frozen=True)
class Entry:
    before: Seen  # before the first setup
    after: Seen | None  # what the latest setup left; None: changed by someone between two setups


class Restore(StrEnum):
    SAME = "same"  # already as it was
    PUT_BACK = "put back"  # write the saved bytes (or make the folder), or delete what was absent
    REMOVE_DIR = "remove folder"  # a folder absent before: removed if empty
    KEPT = "kept"  # changed since setup and not equivalent: the user's change stays


def _parsed(data: bytes | None, suffix: str) -> Any:
    """What a config file says; no file and an empty one say nothing ({}). Bytes when unparsable."""
    if not data or not data.strip():
        return {}
    try:
        if suffix == ".json":
            return json.loads(data)
        if suffix == ".toml":
            return tomllib.loads(data.decode())
    except (ValueError, UnicodeDecodeError):
        pass
    return data


def equivalent(a: bytes | None, b: bytes | None, suffix: str) -> bool:
    """Whether two versions of a config file say the same (JSON or TOML parsed; else the bytes)."""
    return a == b or _parsed(a, suffix) == _parsed(b, suffix)


def remember(old: Entry | None, before: Seen, after: Seen) -> Entry:
    """The entry after one more setup that found `before` and left `after`."""
    if old is None:
        return Entry(before, after)
    untouched = old.after is not None and old.after.kind == before.kind and old.after.data == before.data
    return Entry(old.before, after if untouched else None)


def restore_action(entry: Entry, at_undo: Seen, now: Seen, suffix: str) -> Restore:
    """What undo does to one path: `at_undo` is what it held when undo began, `now` after the
    uninstall."""
    before = entry.before
    if before.kind is Kind.ABSENT and now.kind is Kind.DIR:
        return Restore.REMOVE_DIR
    if now == before or (before.kind is Kind.DIR and now.kind is Kind.DIR):
        return Restore.SAME
    if before.kind is Kind.DIR:
        return Restore.PUT_BACK if now.kind is Kind.ABSENT else Restore.KEPT
    if entry.after is not None and (at_undo.kind, at_undo.data) == (entry.after.kind, entry.after.data):
        return Restore.PUT_BACK
    if now.kind is Kind.DIR:
        return Restore.KEPT
    return Restore.PUT_BACK if equivalent(before.data, now.data, suffix) else Restore.KEPT


# --- the files themselves -----------------------------------------------------------------------

def look(path: Path) -> Seen:
    """What `path` holds now (a link counts as what it points to)."""
    try:
        if path.is_dir():
            return Seen(Kind.DIR, mode=path.stat().st_mode & 0o777)
        return Seen(Kind.FILE, path.read_bytes(), path.stat().st_mode & 0o777)
    except FileNotFoundError:
        return ABSENT


def apply(path: Path, action: Restore, before: Seen) -> bool:
    """Carry out `action` on `path`; False when a folder to remove holds something (it stays)."""
    if action is Restore.REMOVE_DIR:
        try:
            path.rmdir()
        except OSError:
            return False
    elif action is Restore.PUT_BACK and before.kind is Kind.DIR:
        path.mkdir(mode=before.mode or 0o700, parents=True, exist_ok=True)
    elif action is Restore.PUT_BACK and before.kind is Kind.FILE:
        write_file(path, before.data or b"", mode=before.mode or 0o600)
        os.chmod(path, before.mode or 0o600)  # as it was, even a write bit for others write_file takes
    elif action is Restore.PUT_BACK:
        path.unlink(missing_ok=True)
    return True


def _seen_json(seen: Seen | None) -> dict[str, Any] | None:
    if seen is None:
        return None
    data = base64.b64encode(seen.data).decode() if seen.data is not None else None
    return {"kind": seen.kind.value, "data": data, "mode": seen.mode}


def _seen_of(value: Any) -> Seen | None:
    if not isinstance(value, dict):
        return None
    data = value.get("data")
    mode = value.get("mode")
    return Seen(Kind(value["kind"]), base64.b64decode(data) if isinstance(data, str) else None,
                mode if isinstance(mode, int) else None)


def save_entries(entries: dict[str, Entry]) -> list[dict[str, Any]]:
    return [{"path": path, "before": _seen_json(e.before), "after": _seen_json(e.after)}
            for path, e in sorted(entries.items())]


def load_entries(rows: Iterable[Any]) -> dict[str, Entry]:
    """Entries as `save_entries` wrote them; ValueError on a row of another shape."""
    entries = {}
    for row in rows:
        before = _seen_of(row.get("before")) if isinstance(row, dict) else None
        if before is None or not isinstance(row.get("path"), str):
            raise ValueError(f"not a saved path: {str(row)[:80]}")
        entries[row["path"]] = Entry(before, _seen_of(row.get("after")))
    return entries
