"""The ids the spool has delivered, so a message that comes again is written once per target.

`delivered.log` is append-only, one entry a line, on disk before `deliver` returns:

    <epoch>\\t<id>              delivered whole: every target has its line
    <epoch>\\t<id>\\t<target>    only <target> got its line before a crash cut the delivery short

`deliver` writes each target's line first and the whole entry last, all under the spool lock.
A SIGKILL in between leaves lines whose ids the log lacks. Every append to a spool file calls
`note_tail` first, so such lines are still the last ones of their file (or, where a batch was cut
short across a rotation, of the generations before it) when they are found, and are recorded as
partial; a redelivery then skips the targets that already hold them.

A batch (`hold` ... `flush`) keeps its entries in memory, applied at once so the batch sees
them, and writes them in one append when the batch ends, after its spool lines are synced:
the log never names a line a power cut could still take away. A batch that fails is
`drop`ped, and the view is read from the file again.

Entries are kept for `keep_s` (60 days, longer than the relay keeps undelivered mail). Once
the log holds more than `compact_at` entries and its oldest is a quarter of `keep_s` past
that, it is rewritten without the expired ones: at most one rewrite per 15 days.
"""

from __future__ import annotations

import math
import os
import time
from pathlib import Path

from durable.files import open_private, replace_file
from durable.ndjson import complete_lines
from spool_writer import lines

__all__ = ["DeliveredIndex", "parse"]

KEEP_S = 60 * 86400
COMPACT_AT = 50_000

Entry = tuple[int, str, str | None]  # (epoch, id, target of a partial delivery or None)


def parse(data: bytes) -> tuple[list[Entry], int]:
    """The entries in the complete lines of `data` and the bytes those span; damaged lines skipped."""
    complete, used = complete_lines(data)
    entries: list[Entry] = []
    for raw in complete:
        fields = raw.rstrip(b"\n").decode(errors="replace").split("\t")
        if len(fields) in (2, 3) and fields[0].isdigit() and fields[1]:
            entries.append((int(fields[0]), fields[1], fields[2] if len(fields) == 3 else None))
    return entries, used


def format_entry(entry: Entry) -> bytes:
    stamp, msg_id, target = entry
    return "\t".join([str(stamp), msg_id, *([target] if target else [])]).encode() + b"\n"


class DeliveredIndex:
    """An in-memory view of `delivered.log`, caught up by `refresh` under the spool lock."""

    def __init__(self, path: Path, keep_s: float = KEEP_S, compact_at: int = COMPACT_AT) -> None:
        self.path = path
        self.keep_s = keep_s
        self.compact_at = compact_at
        self._reset(None)
        self._pending: list[Entry] | None = None  # a batch's entries, not yet in the file

    def _reset(self, inode: int | None) -> None:
        self._inode = inode
        self._read_whole: lines.FileState | None = None  # the log as last read to its end
        self._pos = 0
        self._lines = 0
        self._oldest = math.inf
        self._done: dict[str, int] = {}
        self._partial: dict[str, dict[str, int]] = {}

    def unchanged(self) -> bool:
        """Whether the log is still as this view last read it whole (one `stat`): then `refresh`
        has nothing to read. Any append, compaction or removal changes what this compares."""
        state = lines.file_state(self.path)
        return self._inode is None if state is None else self._read_whole == state

    def refresh(self) -> None:
        """Read what other processes appended since; start over if the log was compacted."""
        if self._read_whole is not None and self.unchanged():
            return
        try:
            fd = open_private(self.path, os.O_RDONLY)
        except FileNotFoundError:
            if self._inode is not None:  # the file this view was read from is gone
                self._reset(None)
                self._reapply_pending()
            return
        try:
            st = os.fstat(fd)
            reset = st.st_ino != self._inode or st.st_size < self._pos
            if reset:
                self._reset(st.st_ino)
            data = lines.read_from(fd, self._pos)
        finally:
            os.close(fd)
        entries, used = parse(data)
        self._pos += used
        self._lines += len(entries)
        for entry in entries:
            self._apply(entry)
        if reset:
            self._reapply_pending()
        if self._pos == st.st_size:  # nothing torn or written since the fstat
            self._read_whole = lines.state_of(st)

    def _reapply_pending(self) -> None:
        """A batch's own entries, known again after the view was read anew. Only then: they were
        applied when added, and applying them on every refresh made a page of N messages cost
        N² applications."""
        for entry in self._pending or []:
            self._apply(entry)

    def _apply(self, entry: Entry) -> None:
        stamp, msg_id, target = entry
        self._oldest = min(self._oldest, stamp)
        if target is None:
            self._done[msg_id] = stamp
        else:
            self._partial.setdefault(msg_id, {})[target] = stamp

    def delivered(self, msg_id: str) -> bool:
        return msg_id in self._done

    def targets_with(self, msg_id: str) -> set[str]:
        """The targets a cut-short delivery of `msg_id` already reached."""
        return set(self._partial.get(msg_id, ()))

    def mark_partial(self, msg_id: str, target: str) -> None:
        self._append((int(time.time()), msg_id, target))

    def mark_delivered(self, msg_id: str) -> None:
        self._append((int(time.time()), msg_id, None))
        self._compact_if_due()

    def _compact_if_due(self) -> None:
        now = time.time()
        if (self._pending is None and self._lines > self.compact_at
                and self._oldest < now - self.keep_s * 1.25):
            self.compact(now)

    def note_tail(self, spool_file: Path, target: str) -> None:
        """Record the lines a crashed delivery left at the end of `spool_file` (the ids this log
        lacks), before anything follows them. Reads one line when there are none; goes on into
        the rotated generations only while every line it has read is unknown."""
        for line in lines.tail_lines(spool_file):
            msg_id = lines.id_of(line)
            if msg_id is None or self.delivered(msg_id) or target in self.targets_with(msg_id):
                return
            self.mark_partial(msg_id, target)

    def hold(self) -> None:
        """Start a batch: entries are applied now and written by `flush`."""
        self._pending = []

    def flush(self) -> None:
        """Write the batch's entries in one durable append (under the spool lock)."""
        pending, self._pending = self._pending, None
        if pending:
            try:
                self._write(pending)
            except BaseException:
                self._reset(None)  # the file lacks what memory holds: read it again next time
                raise
        self._compact_if_due()

    def drop(self) -> None:
        """End a batch that failed: forget its entries, and read the file again next time."""
        self._pending = None
        self._reset(None)

    def _append(self, entry: Entry) -> None:
        if self._pending is not None:
            self._pending.append(entry)
            self._apply(entry)
            return
        self._write([entry])
        self._apply(entry)

    def _write(self, entries: list[Entry]) -> None:
        data = b"".join(map(format_entry, entries))
        self._read_whole = None
        at = lines.append(self.path, data)
        if at == self._pos and self._inode is not None:
            self._pos, self._lines = at + len(data), self._lines + len(entries)
            # Under the spool lock, as every append is: the log is now what this view holds.
            state = lines.file_state(self.path)
            if state is not None and state[:2] == (self._inode, self._pos):
                self._read_whole = state
        # else: refresh reads them again and counts them then; applying an entry twice is harmless

    def compact(self, now: float | None = None) -> None:
        """Rewrite the log with the entries younger than `keep_s`; atomic, so readers see old or new."""
        horizon = (time.time() if now is None else now) - self.keep_s
        kept: list[Entry] = [(t, i, None) for i, t in self._done.items() if t > horizon]
        kept += [(t, i, target) for i, targets in self._partial.items() if i not in self._done
                 for target, t in targets.items() if t > horizon]
        data = b"".join(map(format_entry, kept))
        replace_file(self.path, data)
        inode = os.lstat(self.path).st_ino  # under the spool lock: nobody renamed it since
        self._reset(inode)
        self._pos, self._lines = len(data), len(kept)
        for entry in kept:
            self._apply(entry)
