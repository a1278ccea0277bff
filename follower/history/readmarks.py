"""Read marks: per contact, the arrival time of the newest received message a person has seen.

One small JSON file in the identity folder, `read-marks.json`, keyed by the contact's
fingerprint (names can change). Only a person reading (`talk show`) writes it, under the
folder's lock and by atomic replacement, so it never waits on the follower, and the follower,
which never reads it, never waits on it. A mark only moves forward: two `talk show` that race
leave the newer mark.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from durable.files import read_json, write_json
from durable.locks import folder_locked
from follower.history.timeline import raised

__all__ = ["READ_MARKS_FILE", "ReadMarks"]

READ_MARKS_FILE = "read-marks.json"


class ReadMarks:
    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.path = folder / READ_MARKS_FILE

    def all(self) -> dict[str, float]:
        """Each contact's mark; a contact never read has none (everything from it is unread).

        Raises:
            UserError: the file is damaged (it says how to recover).
        """
        raw = read_json(self.path, {})
        if not isinstance(raw, dict):
            return {}
        return {fp: float(at) for fp, at in raw.items() if isinstance(at, int | float)}

    def advance(self, newest: Mapping[str, float]) -> int:
        """Move the marks of these contacts up to these arrival times (never back); how many moved."""
        if not newest:
            return 0
        with folder_locked(self.folder):
            marks = self.all()
            after = raised(marks, newest)
            if after != marks:
                write_json(self.path, after)
        return sum(after[fp] != marks.get(fp) for fp in after)
