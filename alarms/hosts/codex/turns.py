"""Whether a Codex thread is running a turn, read from its rollout file.

Codex appends one JSON line per event to the thread's rollout (the hooks' `transcript_path`),
and marks each turn with an `event_msg` whose payload type is `task_started` at its start and
`task_complete` (or `turn_aborted`, when the user interrupts it) at its end. The last of these
says whether the thread is busy now, and counting the starts tells whether a turn began
since some moment, whoever started it (the user, or a queued message).

`TurnLog` reads the file incrementally (only the bytes added since its last look, complete lines
only), so watching a long rollout costs a stat per look. A rotated or rewritten file (another
inode, or shorter than what was read) is read again from the start. `advance` is the pure part.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass

STARTED = frozenset({"task_started"})
ENDED = frozenset({"task_complete", "turn_aborted"})
MARKERS = (b"task_started", b"task_complete", b"turn_aborted")


@dataclass(frozen=True)
class Turns:
    busy: bool | None = None  # None: no turn seen yet (a thread is idle until its first turn)
    started: int = 0  # turns started so far

    @property
    def idle(self) -> bool:
        return self.busy is not True


def event_type(line: bytes) -> str | None:
    """The payload type of a turn start or end line, else None (most lines: no parse at all)."""
    if not any(m in line for m in MARKERS):
        return None
    try:
        obj = json.loads(line)
    except ValueError:
        return None
    payload = obj.get("payload") if isinstance(obj, dict) and obj.get("type") == "event_msg" else None
    if not isinstance(payload, dict):
        return None
    kind = payload.get("type")
    return kind if isinstance(kind, str) and kind in STARTED | ENDED else None


def advance(turns: Turns, lines: list[bytes]) -> Turns:
    """`turns` after the rollout lines `lines` (complete lines, in order)."""
    for line in lines:
        kind = event_type(line)
        if kind in STARTED:
            turns = Turns(True, turns.started + 1)
        elif kind in ENDED:
            turns = Turns(False, turns.started)
    return turns


class TurnLog:
    """One rollout file, read as it grows."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.inode: int | None = None
        self.offset = 0
        self.turns = Turns()

    def look(self) -> Turns | None:
        """The thread's turns now, or None if the rollout cannot be read."""
        try:
            with open(self.path, "rb") as f:
                st = os.fstat(f.fileno())
                if st.st_ino != self.inode or st.st_size < self.offset:
                    self.inode, self.offset, self.turns = st.st_ino, 0, Turns()
                if st.st_size == self.offset:
                    return self.turns
                f.seek(self.offset)
                data = f.read(st.st_size - self.offset)
        except OSError:
            return None
        end = data.rfind(b"\n") + 1  # a half-written last line waits for the next look
        self.turns = advance(self.turns, data[:end].splitlines())
        self.offset += end
        return self.turns
