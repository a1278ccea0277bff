"""One conversation as one timeline: mail received (spooled, taken by `talk receive`, or held)
and mail sent, in time order.

Pure: the streams come in as values (spool records and the receive log's, which carry the
same fields; held entries, outbox entries, task-ledger events) and `Line`s come out. Each line
is placed at a time this machine's clock took, never at the time a peer claims: received mail
at its arrival (`received`, stamped by the spool writer or the receive log; `held_at` for held
mail), sent mail when it was sent. A peer's clock, wrong or hostile, can then neither reorder
the conversation nor keep a message "new" for ever.

Unread: a received line is unread when it arrived after its sender's read mark (an arrival
time per contact, `follower.history.readmarks`); sent lines are never unread.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from enum import StrEnum
from typing import Any, NamedTuple

from follower.send.outbox import Entry

__all__ = ["Direction", "FileNote", "Line", "file_notes", "held_line", "marks_after", "merge",
           "newest_arrivals", "pick", "raised", "received_line", "sent_line", "unseen", "with_tasks"]


class Direction(StrEnum):
    IN = "in"
    OUT = "out"


class FileNote(NamedTuple):
    """A file a received message came with, where talk saved it (`follower.files.taker`)."""

    path: str
    size: int
    sha256: str


def file_notes(value: object) -> tuple[FileNote, ...]:
    """A spool record's "files", each entry checked (it was read from a file)."""
    if not isinstance(value, list):
        return ()
    return tuple(FileNote(e["path"], e["size"], e["sha256"]) for e in value
                 if isinstance(e, dict) and isinstance(e.get("path"), str) and type(e.get("size")) is int
                 and isinstance(e.get("sha256"), str))


class Line(NamedTuple):
    """One message of the timeline. `at` is an epoch on this machine's clock; `state` is a sent
    message's outbox state (None for received mail); `task` and `task_status` come from the task
    ledger when the message carried a task, a result or a question."""

    id: str
    direction: Direction
    name: str
    fingerprint: str
    at: float
    kind: str
    text: str
    state: str | None = None
    reason: str = ""
    held: bool = False
    unread: bool = False
    task: str | None = None
    task_status: str | None = None
    gist: str = ""  # a task's own words, a result's summary, a question: the text worth a preview
    files: tuple[FileNote, ...] = ()  # the files it came with, as saved here


def epoch(stamp: object) -> float:
    """An ISO-8601 time (as the spool writes it) as an epoch; 0.0 for anything else."""
    if not isinstance(stamp, str):
        return 0.0
    try:
        return datetime.fromisoformat(stamp).timestamp()
    except ValueError:
        return 0.0


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""


def received_line(record: Mapping[str, Any], names: Mapping[str, str]) -> Line:
    """A spool record (or the receive log's, of the same fields) as a line. A record is data
    from a file (see `spool_writer.record`): any field may be missing or of another type, so
    each is checked here. `names` maps fingerprints to today's contact names (a contact renamed
    since keeps one name in the view)."""
    sender = _text(record.get("from"))
    arrived = epoch(record.get("received")) or epoch(record.get("ts"))
    task = record.get("task")
    return Line(str(record["id"]), Direction.IN, names.get(sender) or _text(record.get("name")) or sender,
                sender, arrived, _text(record.get("kind")) or "chat", _text(record.get("text")),
                task=task if isinstance(task, str) else None, files=file_notes(record.get("files")))


def held_line(msg_id: str, entry: Mapping[str, Any], names: Mapping[str, str]) -> Line:
    """A held-mail entry (`follower.held`) as a line, marked held, with why in `reason`."""
    record = entry.get("record")
    line = received_line({**(record if isinstance(record, dict) else {}), "id": msg_id}, names)
    held_at = entry.get("held_at")
    at = float(held_at) if isinstance(held_at, int | float) else line.at
    return line._replace(at=at, held=True, reason=_text(entry.get("reason")))


def sent_line(entry: Entry) -> Line:
    task = entry.extra.get("task")
    return Line(entry.id, Direction.OUT, entry.name, entry.to, entry.ts, entry.kind, entry.text,
                state=entry.state, reason=entry.reason, task=task if isinstance(task, str) else None)


def unseen(lines: Iterable[Line], seen: set[str]) -> list[Line]:
    """The lines whose id is not in `seen`, each id once (the first given), and `seen` grown by
    them. One message received can have several lines: in the spool and the receive log, or
    twice in the log when it was taken again after a crash before its ack."""
    out = []
    for line in lines:
        if line.id not in seen:
            seen.add(line.id)
            out.append(line)
    return out


def merge(received: Iterable[Line], held: Iterable[Line], sent: Iterable[Line]) -> list[Line]:
    """Every line once, oldest first. A message both in the spool and still in the held box (a
    release cut short) shows as spooled: the spool is where it ended up."""
    lines: dict[str, Line] = {}
    for line in [*held, *received, *sent]:
        lines[line.id] = line
    return sorted(lines.values(), key=lambda line: (line.at, line.id))


GIST = {"task": "text", "result": "summary", "question": "question"}  # ledger event → its words


def with_tasks(lines: Iterable[Line], events: list[dict[str, Any]],
               rows: Mapping[str, Mapping[str, Any]]) -> list[Line]:
    """Lines with their task: the ledger event that names a message gives its kind (a sent
    envelope says only "chat") and its gist (GIST); the status is the ledger's latest for (peer,
    task) in `rows` (`follower.tasks.ledger.fold`)."""
    by_msg = {e["msg"]: e for e in events if isinstance(e.get("msg"), str) and e.get("ev") in GIST}
    out = []
    for line in lines:
        event = by_msg.get(line.id)
        if event is not None:
            gist = event.get(GIST[event["ev"]])
            line = line._replace(kind=event["ev"], gist=gist if isinstance(gist, str) else "")
        if line.task is not None:
            row = rows.get(f"{line.fingerprint}/{line.task}")
            line = line._replace(task_status=None if row is None else str(row.get("status")))
        out.append(line)
    return out


def marks_after(lines: Iterable[Line], marks: Mapping[str, float]) -> list[Line]:
    """The lines with `unread` set: received, and arrived after their sender's mark."""
    return [line._replace(unread=line.direction is Direction.IN
                          and line.at > marks.get(line.fingerprint, 0.0)) for line in lines]


def newest_arrivals(lines: Iterable[Line]) -> dict[str, float]:
    """Per sender, the arrival of the newest received line: the marks that make these read."""
    newest: dict[str, float] = {}
    for line in lines:
        if line.direction is Direction.IN:
            newest[line.fingerprint] = max(line.at, newest.get(line.fingerprint, 0.0))
    return newest


def raised(marks: Mapping[str, float], newest: Mapping[str, float]) -> dict[str, float]:
    """`marks` moved up to `newest` where that is later; a mark never moves back."""
    return {**marks, **{fp: at for fp, at in newest.items() if at > marks.get(fp, 0.0)}}


def pick(lines: list[Line], unread_only: bool, limit: int) -> list[Line]:
    """The lines to show: only the unread ones if asked, then the newest `limit` (0: all)."""
    chosen = [line for line in lines if line.unread] if unread_only else lines
    return chosen[-limit:] if limit > 0 else chosen
