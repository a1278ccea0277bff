"""Delivering one message into the spool: a copy for every live session, or the inbox.

The follower acks a message on the relay only after `deliver` returns, so `deliver` returns
only once the line is on disk, and a message that comes again (the follower crashed before
its ack) is written nowhere twice. Everything happens under one flock on the spool folder, so
rotation, which renames files, is safe against other writers.

`batch` is for a caller that acks a page of messages at once: inside it, `deliver` writes each
line at once (readers see it) but syncs nothing; when the block ends, every file written is
synced once, and then the index takes the page's ids in one durable append. So a page costs
one fdatasync per file, not one per line, and is on disk before the caller acks it. Killed
inside the block, the lines are there and the index lacks them: `DeliveredIndex.note_tail`
finds them at the ends of their files when the page comes again.
"""

from __future__ import annotations

import contextlib
import re
import time
from collections.abc import Iterator
from functools import partial
from pathlib import Path

from durable.parsed_file import ParsedFile
from spool_writer import lines, registry
from spool_writer.index import DeliveredIndex
from spool_writer.layout import DEFAULT_GENERATIONS, DEFAULT_MAX_BYTES, SpoolLayout, flocked
from spool_writer.record import REQUIRED, SpoolRecord

__all__ = ["Spool", "utc_stamp"]

MAX_TAILS = 256  # spool files remembered (`Spool._tails`): a file per session, and sessions come and go
_ID = re.compile(r"[^\x00-\x20\x7f]{1,256}")  # it is a word in delivered.log: no blanks


def check_record(record: SpoolRecord) -> str:
    """The record's id; a record without the message fields is a caller's bug, not mail.

    Checked at run time all the same: a record released from the held box was read from a file.
    """
    missing = [k for k in REQUIRED if k not in record]
    if missing:
        raise ValueError(f"spool record lacks {', '.join(missing)}; pass the whole opened message")
    msg_id = record["id"]
    if not isinstance(msg_id, str) or not _ID.fullmatch(msg_id):
        raise ValueError(f"spool record id {msg_id!r} must be 1-256 characters without blanks")
    return msg_id


def received_now() -> str:
    return utc_stamp(time.time())


def utc_stamp(epoch: float) -> str:
    """`epoch` as the spool writes times: UTC ISO 8601 to the microsecond."""
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(epoch)) + f".{int(epoch % 1 * 1e6):06d}Z"


class Spool:
    """The writing side of one identity's spool folder: one per process (or thread) that writes."""

    def __init__(
        self, root: Path, max_bytes: int = DEFAULT_MAX_BYTES, generations: int = DEFAULT_GENERATIONS
    ) -> None:
        if max_bytes < 1 or generations < 1:
            raise ValueError("a spool needs max_bytes >= 1 and generations >= 1")
        self.layout = SpoolLayout(root)
        self.max_bytes = max_bytes
        self.generations = generations
        self.index = DeliveredIndex(self.layout.index)
        self._unsynced: list[Path] | None = None  # inside `batch`: the files written, not synced
        self._made = False  # inside `batch`: the folder was made (or found) by a delivery
        # Each spool file as this writer left it, every line in it known to the index: while the
        # file is still so, no crash left lines at its end since, and `note_tail` need not look.
        self._tails: dict[Path, lines.FileState] = {}
        # Read for every message delivered; parsed again only when a door changed it.
        self._sessions = ParsedFile(self.layout.registry, None, partial(registry.records_of, self.layout))

    @contextlib.contextmanager
    def batch(self) -> Iterator[None]:
        """Deliveries that become durable together when the block ends (see the module doc)."""
        self._unsynced, self._made = [], False
        self.index.hold()
        try:
            yield
        except BaseException:
            self._unsynced = None
            self._forget()
            raise
        written, self._unsynced = self._unsynced, None
        try:
            if not written:  # a delivery made the folder; a page that delivered none may find none
                self.layout.ensure()
            with flocked(self.layout.lock, kept=True):
                lines.sync_files([p for p in written if p.exists()])  # a gc may have removed one
                self.index.flush()
        except BaseException:
            self._forget()
            raise

    def _forget(self) -> None:
        """After a failure: the index is read again, and every spool file's end looked at again
        (lines written may be missing from the index)."""
        self.index.drop()
        self._tails.clear()

    def deliver(self, record: SpoolRecord, received: str | None = None) -> bool:
        """Append `record` to every live session's spool (or the inbox); False if it came before.
        Its `received` is now, or `received` for mail that arrived earlier (held mail).

        Each line is written with one write and fsynced; the id goes into the index last, so a
        kill at any point is repaired by delivering the same record again.
        """
        msg_id = check_record(record)
        if not self._made:
            self.layout.ensure()
            self._made = self._unsynced is not None  # once a batch: it fails whole if one is removed
        with flocked(self.layout.lock, kept=True):
            self.index.refresh()
            if self.index.delivered(msg_id):
                return False
            line = lines.encode({**record, "received": received or received_now()})
            tails = {}
            try:
                for target in self.targets():
                    tails[target] = self._append_once(target, msg_id, line)
                self.index.mark_delivered(msg_id)
            except BaseException:
                self._tails.clear()
                raise
            if len(self._tails) > MAX_TAILS:
                self._tails.clear()
            self._tails.update((t, end) for t, end in tails.items() if end is not None)
        return True

    def knows(self, msg_id: str) -> bool:
        """Whether `msg_id` was delivered whole (a follower may ack it without opening it again).
        Without the lock while the index is as this writer last read it: a delivery of the same
        id under way elsewhere is found by `deliver`, which looks again under the lock."""
        if self.index.delivered(msg_id):
            return True  # an id leaves the index only when it is days old
        if self.index.unchanged() or not self.layout.root.exists():
            return False
        with flocked(self.layout.lock, shared=True):
            self.index.refresh()
            return self.index.delivered(msg_id)

    def targets(self) -> list[Path]:
        """The spool files new mail goes to: one per live session, else the inbox."""
        live = registry.live_sids(self._sessions.get())
        return [self.layout.session_file(sid) for sid in live] or [self.layout.inbox]

    def _append_once(self, target: Path, msg_id: str, line: bytes) -> lines.FileState | None:
        """Write `line` to `target` unless a delivery cut short wrote it there; the file as this
        left it (`_tails`), if it wrote."""
        name = self.layout.target_name(target)
        before = lines.file_state(target)
        if before is None or self._tails.get(target) != before:
            self.index.note_tail(target, name)
        if name in self.index.targets_with(msg_id):
            return None  # a delivery cut short by a crash already wrote it here
        size = before[1] if before is not None else 0
        unsynced = self._unsynced
        if unsynced is not None and target in unsynced and size >= self.max_bytes:
            lines.sync_files([target])  # about to be renamed away: sync what the batch wrote first
            unsynced.remove(target)
        lines.rotate_if_full(target, self.max_bytes, self.generations, size)
        lines.append(target, line, sync=unsynced is None)
        if unsynced is not None and target not in unsynced:
            unsynced.append(target)
        return lines.file_state(target)
