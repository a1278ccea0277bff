"""SpoolScan: every message in one identity's spool, for a person's eyes, without moving a cursor.

A message sits in the inbox or in the copy of each session that was live when it came (and is
moved between them on register and unregister), in the current file or a rotated generation.
A scan reads all of them once, then, on each call after, only the bytes written since (one
`CursorState` per file, kept in memory and never saved), and gives each message id once.
"""

from __future__ import annotations

from pathlib import Path

from spool_writer.cursor import CursorState, read_new
from spool_writer.layout import SpoolLayout
from spool_writer.record import SpoolRecord

__all__ = ["SpoolScan"]


class SpoolScan:
    def __init__(self, root: Path) -> None:
        self.layout = SpoolLayout(root)
        self.states: dict[Path, CursorState] = {}
        self.seen: set[str] = set()

    def files(self) -> list[Path]:
        """The inbox and every session's copy found now (sessions come and go)."""
        layout = self.layout
        return [layout.inbox, *map(layout.session_file, sorted(layout.session_files_on_disk()))]

    def new(self) -> list[SpoolRecord]:
        """The messages not given yet, in the order the files hold them."""
        found: list[SpoolRecord] = []
        for path in self.files():
            taken = read_new(path, self.states.get(path, CursorState()), keep=0)
            if taken is None:
                continue
            self.states[path] = taken.state
            for record in taken.records:
                if record["id"] not in self.seen:
                    self.seen.add(record["id"])
                    found.append(record)
        return found
