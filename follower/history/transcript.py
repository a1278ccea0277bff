"""Transcript: one identity's conversation with a contact (or with all), read from its files.

It only reads: the spool (every session's copy and the inbox, `spool_writer.scan`), the
receive log (what `talk receive` handed out, `follower.history.receivelog`), the held box, the outbox
and the task ledger. No cursor moves and no lock is held for longer than one
read, so it runs beside a follower and beside the agents' alarms. `read` gives every line once;
`changes` then gives what came since, at a cost that does not grow with the history: the spool
and the append logs are read from the offset reached (a log replaced by compaction or trimming
is read again from its start, and it is small then), the held box only when its folders changed.
The deciding (order, dedup, tasks) is `follower.history.timeline`'s.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from durable.ndjson import read_after
from follower.held import HeldBox
from follower.history.receivelog import RECEIVE_LOG_FILE
from follower.history.timeline import Line, held_line, merge, received_line, sent_line, unseen, with_tasks
from follower.send.outbox import HISTORY_FILE, OUTBOX_FILE, RECENT_BYTES, Entry, fold
from follower.tasks.ledger import TASKS_FILE
from follower.tasks.ledger import fold as fold_tasks
from spool_writer.record import fault
from spool_writer.scan import SpoolScan

__all__ = ["Transcript"]


class _Tail:
    """The new whole lines of an append log; the log's start again when the file was replaced."""

    def __init__(self, path: Path, tail_bytes: int | None = None) -> None:
        self.path = path
        self.tail_bytes = tail_bytes  # read only this much of the end the first time
        self.inode: int | None = None
        self.offset = 0

    def read(self) -> tuple[list[dict[str, Any]], bool]:
        """(records, whether the log was read from its start because it is new or replaced)."""
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return [], False
        restarted = st.st_ino != self.inode
        if restarted:
            tail = self.tail_bytes if self.inode is None else None
            self.inode, self.offset = st.st_ino, 0 if tail is None else max(0, st.st_size - tail)
            # A start inside a line leaves a fragment that is no JSON object: read_after skips it.
        records, self.offset = read_after(self.path, self.offset)
        return records, restarted


class Transcript:
    """`peer`: a contact's fingerprint, or None for every contact. `names`: fingerprint → contact
    name. `everything`: the whole sent history, not only its recent part."""

    def __init__(self, folder: Path, peer: str | None, names: Mapping[str, str],
                 everything: bool = False) -> None:
        self.peer = peer
        self.names = names
        self.spool = SpoolScan(folder / "spool")
        self.taken = _Tail(folder / RECEIVE_LOG_FILE)
        self.received_ids: set[str] = set()
        self.held = HeldBox(folder)
        self.held_seen: set[str] = set()
        self.held_stamp: tuple[tuple[str, int, int], ...] | None = None
        self.sent: dict[str, Entry] = {}
        self.sent_shown: dict[str, tuple[str, str]] = {}
        self.logs = [_Tail(folder / HISTORY_FILE, None if everything else RECENT_BYTES),
                     _Tail(folder / OUTBOX_FILE)]
        self.ledger = _Tail(folder / TASKS_FILE)
        self.task_events: list[dict[str, Any]] = []
        self.task_rows: dict[str, dict[str, Any]] = {}

    def _mine(self, fingerprint: object) -> bool:
        return self.peer is None or fingerprint == self.peer

    def read(self) -> list[Line]:
        """Every line, oldest first (the first call; later ones give what `changes` gives)."""
        return self.changes()

    def changes(self) -> list[Line]:
        """The lines not given yet, and sent ones whose state moved since, oldest first."""
        self._read_tasks()
        return with_tasks(merge(self._new_received(), self._new_held(), self._changed_sent()),
                          self.task_events, self.task_rows)

    def _new_received(self) -> list[Line]:
        # The log is a file of ours, but a line may be torn or odd: only whole records count.
        taken = [r for r in self.taken.read()[0] if fault(r) is None]
        lines = [received_line(r, self.names) for r in [*self.spool.new(), *taken]
                 if self._mine(r.get("from"))]
        return unseen(lines, self.received_ids)

    def _read_tasks(self) -> None:
        events, restarted = self.ledger.read()
        if restarted:
            self.task_events = []
        if events or restarted:
            self.task_events += events
            self.task_rows = fold_tasks(self.task_events)

    def _new_held(self) -> list[Line]:
        stamp = self.held.stamp()
        if stamp == self.held_stamp:
            return []
        self.held_stamp = stamp
        fresh = [i for i in self.held.ids() if i not in self.held_seen]
        lines = []
        for msg_id, entry in self.held.entries(fresh).items():
            self.held_seen.add(msg_id)  # another contact's stays another's: not read again
            record = entry.get("record")
            if not isinstance(record, dict) or not self._mine(record.get("from")):
                continue
            lines.append(held_line(msg_id, entry, self.names))
        return lines

    def _changed_sent(self) -> list[Line]:
        touched: set[object] = set()
        for log in self.logs:
            events = log.read()[0]
            fold(events, self.sent)
            touched.update(e.get("id") for e in events)
        lines = []
        for msg_id in touched:
            entry = self.sent.get(msg_id) if isinstance(msg_id, str) else None
            if entry is None or not self._mine(entry.to):
                continue
            now = (entry.state, entry.reason)
            if self.sent_shown.get(entry.id) != now:
                self.sent_shown[entry.id] = now
                lines.append(sent_line(entry))
        return lines
