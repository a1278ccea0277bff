"""The registry of agent sessions, `sessions.json`: who gets a copy of new mail, and since when.

A session is live while its host process runs (same pid, same start time). Changes happen
under the spool lock; the file is replaced atomically, so a reader without the lock sees a
whole registry, old or new.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from typing import Any

from durable.errors import UserError
from durable.files import read_json, write_json
from spool_writer import process
from spool_writer.layout import SpoolLayout

__all__ = ["OTHER", "STAND_IN_PREFIX", "SessionRecord", "check_host", "load", "stand_in_sid"]

VERSION = 1


HOST_MAX = 32
OTHER = "other"  # a session whose door does not know its host program


def check_host(value: str) -> str:
    """The host program a session runs in, as a name the registry can hold: which names exist is
    the doors' business (`alarms.registry`, checked where a person gives one); the spool only
    keeps a short lowercase word."""
    if not (0 < len(value) <= HOST_MAX and value.isascii() and all(c.isalnum() or c == "-" for c in value)
            and value == value.lower()):
        raise UserError(f"bad host name {value!r}: a short lowercase word, as `talk install` names hosts")
    return value


def utc_now_iso() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


@dataclass(frozen=True)
class SessionRecord:
    sid: str
    host: str
    pid: int
    pid_start: int | None
    registered: str

    def alive(self) -> bool:
        return process.alive(self.pid, self.pid_start)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> SessionRecord:
        start = obj.get("pid_start")
        return cls(str(obj["sid"]), check_host(str(obj["host"])), int(obj["pid"]),
                   None if start is None else int(start), str(obj["registered"]))


STAND_IN_PREFIX = "mcp-"


def stand_in_sid(pid: int) -> str:
    """The id of a session named after its host process, by a door that cannot learn the host's
    own session id (the MCP server knows only its parent)."""
    return f"{STAND_IN_PREFIX}{pid}"


def same_process(a: SessionRecord, b: SessionRecord) -> bool:
    return a.pid == b.pid and a.pid_start == b.pid_start


def stand_ins_of(records: dict[str, SessionRecord], record: SessionRecord) -> list[str]:
    """The stand-in sessions of `record`'s host process other than `record` itself: one host
    process is one talk session, however many doors it uses, so they give way to it."""
    return [sid for sid, rec in records.items()
            if sid != record.sid and sid.startswith(STAND_IN_PREFIX) and same_process(rec, record)]


def session_of(records: dict[str, SessionRecord], pid: int, pid_start: int | None) -> str | None:
    """The session registered for the host process (`pid`, started at `pid_start`), a host's own
    id before a stand-in; None when it has none."""
    probe = SessionRecord("", OTHER, pid, pid_start, "")
    mine = sorted((sid.startswith(STAND_IN_PREFIX), sid) for sid, rec in records.items()
                  if same_process(rec, probe))
    return mine[0][1] if mine else None


def load(layout: SpoolLayout) -> dict[str, SessionRecord]:
    return records_of(layout, read_json(layout.registry, None))


def records_of(layout: SpoolLayout, data: Any) -> dict[str, SessionRecord]:
    """The sessions in the registry's parsed JSON (None: no registry)."""
    if data is None:
        return {}
    try:
        return {sid: SessionRecord.from_json(obj) for sid, obj in data["sessions"].items()}
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise UserError(
            f"{layout.registry} is damaged ({exc!r}); move it aside and register the sessions again"
        ) from exc


def save(layout: SpoolLayout, records: dict[str, SessionRecord]) -> None:
    sessions = {sid: rec.to_json() for sid, rec in sorted(records.items())}
    write_json(layout.registry, {"v": VERSION, "sessions": sessions})


def live_sids(records: dict[str, SessionRecord]) -> list[str]:
    return [sid for sid, rec in records.items() if rec.alive()]
