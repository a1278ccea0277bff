"""Agent sessions: each registered session gets its own copy of new mail while its host runs.

A message is never stranded for want of a reader: with no live session it waits in the inbox,
and the next session to register takes the inbox over (all of it, under the spool lock, so
one session gets it and not two). A session that goes, by `unregister` or `gc`, hands the
lines it has not read back to the inbox.
"""

from __future__ import annotations

import calendar
import os
import time
from dataclasses import dataclass
from pathlib import Path

from durable.errors import NotFound
from durable.files import fsync_dir, open_private
from spool_writer import lines, process, registry, transfer
from spool_writer.cursor import CursorReader, lock_path
from spool_writer.index import DeliveredIndex
from spool_writer.layout import (
    DEFAULT_GENERATIONS,
    DEFAULT_MAX_BYTES,
    SpoolLayout,
    check_sid,
    flocked,
    oldest_first,
)
from spool_writer.registry import SessionRecord, check_host

__all__ = ["Registration", "SessionInfo", "gc", "list_sessions", "register", "session_of",
           "unregister"]

DAY_S = 86400.0


@dataclass(frozen=True)
class Registration:
    sid: str
    host: str
    pid: int
    spool: Path
    took_over: int  # lines taken over from the inbox


@dataclass(frozen=True)
class SessionInfo:
    sid: str
    host: str
    pid: int
    alive: bool
    spool: Path
    registered: str
    unread: int


def register(
    root: Path, host: str, sid: str, pid: int,
    *, max_bytes: int = DEFAULT_MAX_BYTES, generations: int = DEFAULT_GENERATIONS,
) -> Registration:
    """Give session `sid` of the program `pid` its own spool, starting with the inbox's mail.

    Registering a sid again (a resumed session, a new pid) keeps its spool and cursor. A
    stand-in session of the same host process (`registry.stand_in_sid`) gives way: its unread
    lines come along through the inbox, and its door finds this session with `session_of`.
    """
    host, sid = check_host(host), check_sid(sid)
    record = SessionRecord(sid, host, pid, process.identify(pid), registry.utc_now_iso())
    layout = SpoolLayout(root)
    layout.ensure()
    spool = layout.session_file(sid)
    with flocked(layout.lock):
        index = DeliveredIndex(layout.index)
        index.refresh()
        records = registry.load(layout)
        for stand_in in registry.stand_ins_of(records, record):
            _retire(layout, index, records, stand_in, max_bytes, generations)
        inbox = oldest_first(layout.inbox)
        waiting = [line for path in inbox for line in lines.read_lines(path)]
        took = transfer.move(index, layout, waiting, spool, max_bytes, generations)
        lines.remove(inbox)
        _create(spool)
        records[sid] = record  # last: until here no mail goes to this spool, so the move is alone
        registry.save(layout, records)
    return Registration(sid, host, pid, spool, took)


def session_of(root: Path, pid: int) -> str | None:
    """The live session registered for host process `pid` (the same process: its start time is
    checked), else None."""
    layout = SpoolLayout(root)
    if not (layout.registry.exists() and process.alive(pid, None)):
        return None
    start = process.start_time(pid) if process.has_proc() else None
    return registry.session_of(registry.load(layout), pid, start)


def _create(spool: Path) -> None:
    """An empty spool file, so the session's door can start watching it at once."""
    if not spool.exists():
        os.close(open_private(spool, os.O_WRONLY | os.O_CREAT))
        fsync_dir(spool.parent)


def unregister(
    root: Path, sid: str, *, max_bytes: int = DEFAULT_MAX_BYTES, generations: int = DEFAULT_GENERATIONS
) -> int:
    """Remove session `sid`; its unread lines go back to the inbox. Returns how many moved."""
    layout = SpoolLayout(root)
    check_sid(sid)
    if not root.is_dir():
        raise _no_such_session(sid)
    layout.ensure()
    with flocked(layout.lock):
        records = registry.load(layout)
        if sid not in records and sid not in layout.session_files_on_disk():
            raise _no_such_session(sid)
        index = DeliveredIndex(layout.index)
        index.refresh()
        return _retire(layout, index, records, sid, max_bytes, generations)


def _no_such_session(sid: str) -> NotFound:
    return NotFound(f"no session {sid!r} is registered; `talk session list` shows the registered ones")


def _retire(
    layout: SpoolLayout, index: DeliveredIndex, records: dict[str, SessionRecord], sid: str,
    max_bytes: int, generations: int,
) -> int:
    """Hand the session's unread lines to the inbox, then remove its files and its registry entry.

    The cursor's lock is held throughout, so a door reading at this moment either takes a
    line before it is counted as unread, or finds the spool gone.
    """
    spool, cursor_file = layout.session_file(sid), layout.cursor_file(sid)
    with flocked(lock_path(cursor_file)):
        unread = CursorReader(spool, cursor_file).peek().lines
        moved = transfer.move(index, layout, unread, layout.inbox, max_bytes, generations)
        if records.pop(sid, None) is not None:
            registry.save(layout, records)
        # The hook doors keep their pending batches next to the cursor; they die with it.
        pending = spool.with_name(f"{sid}.pending.json")
        lines.remove([*oldest_first(spool), cursor_file, lock_path(cursor_file), pending])
    return moved


def list_sessions(root: Path) -> list[SessionInfo]:
    """The registered sessions, oldest registration first, with liveness and unread counts."""
    layout = SpoolLayout(root)
    if not root.is_dir():
        return []
    infos = []
    for rec in registry.load(layout).values():
        spool = layout.session_file(rec.sid)
        unread = CursorReader(spool, layout.cursor_file(rec.sid)).count_unread()
        infos.append(SessionInfo(rec.sid, rec.host, rec.pid, rec.alive(), spool, rec.registered, unread))
    return sorted(infos, key=lambda i: (i.registered, i.sid))


def gc(
    root: Path, idle_days: float = 14, *, now: float | None = None,
    max_bytes: int = DEFAULT_MAX_BYTES, generations: int = DEFAULT_GENERATIONS,
) -> list[str]:
    """Retire sessions whose host is gone or that nobody wrote or read for `idle_days`.

    A host idle that long is taken to have stopped reading: its mail waits in the inbox for
    the next session that registers. Spool files no registry entry names (left by a crash
    during `register`) are handed back the same way. Returns what was done, in words.
    """
    layout = SpoolLayout(root)
    if not root.is_dir():
        return []
    now = time.time() if now is None else now
    actions: list[str] = []
    layout.ensure()
    with flocked(layout.lock):
        index = DeliveredIndex(layout.index)
        index.refresh()
        records = registry.load(layout)
        for sid, rec in sorted(records.items()):
            reason = _why_retire(layout, rec, now - idle_days * DAY_S)
            if reason:
                moved = _retire(layout, index, records, sid, max_bytes, generations)
                actions.append(f"moved {_lines(moved)} of session {sid} to the inbox; "
                               f"removed its spool ({reason})")
        for sid in sorted(layout.session_files_on_disk() - set(records)):
            moved = _retire(layout, index, records, sid, max_bytes, generations)
            actions.append(f"moved {_lines(moved)} of unregistered spool {sid} to the inbox; removed it")
    return actions


def _why_retire(layout: SpoolLayout, rec: SessionRecord, idle_before: float) -> str:
    if not rec.alive():
        return f"its host process {rec.pid} is gone"
    last = last_activity(layout, rec)
    if last < idle_before:
        return f"nothing written or read since {time.strftime('%Y-%m-%d %H:%M', time.localtime(last))}"
    return ""


def last_activity(layout: SpoolLayout, rec: SessionRecord) -> float:
    """When the session last registered, got mail or was read (epoch seconds)."""
    cursor_file = layout.cursor_file(rec.sid)
    paths = [layout.session_file(rec.sid), cursor_file, lock_path(cursor_file)]
    stamps = [float(calendar.timegm(time.strptime(rec.registered, "%Y-%m-%dT%H:%M:%SZ")))]
    stamps += [path.stat().st_mtime for path in paths if path.exists()]
    return max(stamps)


def _lines(n: int) -> str:
    return f"{n} unread line{'' if n == 1 else 's'}"
