"""How `talk show` writes a timeline line: its columns, their widths and styles, and its JSON.

Pure: a `follower.history.timeline.Line` in, strings out. Every string that a peer could have chosen
(text, kind, task, status, reason, even a contact name, which began as the peer's own choice)
passes `durable.printable` here, so no renderer can let a control character through.

    TIME                 ID            WHO         STATE      TEXT
    2026-12-02 09:47:36  3f2a9c1b4e5d  to bob      delivered  can you look at the flaky test?
    2026-12-02 09:52:10  a1b2c3d4e5f6  from bob    new        [result bob-7f3a: done] fixed it
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any, NamedTuple

from durable.printable import printable
from follower.history.timeline import Direction, Line
from follower.send.outbox import REFUSALS

__all__ = ["HEADER", "STYLES", "Cells", "as_json", "cells", "plain_row", "who_width"]

SHORT_ID = 12  # as `talk outbox` shows ids
TIME_WIDTH = 19
STATE_WIDTH = 9  # "delivered", the longest state
HEADER = ("TIME", "ID", "WHO", "STATE", "TEXT")
# Styles by the rich names of colours; "" is the terminal's own.
STYLES = {"time": "dim", "id": "cyan", "in": "green", "out": "blue", "note": "dim",
          "new": "bold yellow", "held": "magenta", "refused": "red", "expired": "red", "dropped": "red",
          "delivered": "green", "written": "green", "spooled": "green", "text": ""}
EXPLAINED = REFUSALS | {"held"}  # states whose reason is worth a column's room


class Cells(NamedTuple):
    """A line's columns as shown; `state_style` picks the state's colour from STYLES."""

    time: str
    short: str
    who: str
    state: str
    note: str
    text: str
    direction: str
    state_style: str


def when(at: float) -> str:
    return datetime.fromtimestamp(at).strftime("%Y-%m-%d %H:%M:%S") if at else "?"


def who(line: Line) -> str:
    return printable(("from " if line.direction is Direction.IN else "to ") + line.name)


def who_width(names: Iterable[str]) -> int:
    return max((len(printable(n)) + len("from ") for n in names), default=len("WHO"))


def state_of(line: Line) -> str:
    """A sent message's state; for received mail, whether it is held and whether it is new."""
    if line.direction is Direction.OUT:
        return printable(line.state or "")
    return ", ".join(word for word, on in (("held", line.held), ("new", line.unread)) if on)


def note(line: Line) -> str:
    """What the text alone does not say: a task and its status, an unusual kind, why it stopped."""
    parts = []
    if line.task is not None:
        status = f": {line.task_status}" if line.task_status else ""
        parts.append(f"{line.kind} {line.task}{status}")
    elif line.kind != "chat":
        parts.append(line.kind)
    if line.reason and (line.held or line.state in EXPLAINED):
        parts.append(line.reason)
    parts += [f"file {f.path} ({f.size:,} bytes, sha256 {f.sha256})" for f in line.files]
    return printable("; ".join(parts))


def preview(line: Line, full: bool) -> str:
    """The whole text (its own line breaks kept), or the first line of its gist (a task's words
    rather than its envelope's header), marked when there is more."""
    if full:
        return printable(line.text, lines=True)
    text = line.gist or line.text
    first, _, rest = text.strip("\n").partition("\n")
    return printable(first) + (" …" if rest.strip() else "")


def cells(line: Line, full: bool = False) -> Cells:
    state = state_of(line)
    style = "new" if line.unread else state if state in STYLES else ""
    return Cells(when(line.at), printable(line.id[:SHORT_ID]), who(line), state, note(line),
                 preview(line, full), line.direction.value, style)


def plain_row(c: Cells, who_cols: int) -> str:
    """One line of plain aligned text (more lines with --full, each indented under TEXT)."""
    body = f"[{c.note}] {c.text}" if c.note else c.text
    lead = f"{c.time:<{TIME_WIDTH}}  {c.short:<{SHORT_ID}}  {c.who:<{who_cols}}  {c.state:<{STATE_WIDTH}}  "
    return lead + body.replace("\n", "\n" + " " * len(lead))


def as_json(line: Line) -> dict[str, Any]:
    """The line for scripts (`--json`): the whole text, times in UTC ISO 8601."""
    return {"id": line.id, "short": line.id[:SHORT_ID], "dir": line.direction.value, "name": line.name,
            "fingerprint": line.fingerprint,
            "ts": datetime.fromtimestamp(line.at, UTC).isoformat().replace("+00:00", "Z"),
            "kind": line.kind, "state": line.state, "reason": line.reason, "task": line.task,
            "task_status": line.task_status, "held": line.held, "unread": line.unread,
            "files": [f._asdict() for f in line.files], "text": line.text}
