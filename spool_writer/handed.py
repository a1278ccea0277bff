"""The hand-over log: which messages a door has handed to an agent session, and how far.

Doors append one line per message they take from a session's spool, before they move the
cursor (so a crash repeats a line, never loses one), with the receipt state it earned: `delivered`
when the host shows it whole to its model, `written` when the door gives no verdict (an inbox
socket accepted the bytes); such a message gets a second, `delivered` line once the host's
transcript shows it. The follower reads the log from its own offset
(`durable.ndjson.read_after`), sends each sender that receipt, and only then saves the offset.
When it has read everything, it empties the log under the same lock. Doors import it: it needs
only the standard library and the leaf's locked, durable append.
"""

from __future__ import annotations

import fcntl
import os
import time
from pathlib import Path

from durable.files import open_private
from durable.ndjson import append_records
from durable.receipt_states import Receipt
from spool_writer.doorbell import bell_path, ring
from spool_writer.record import SpoolRecord

__all__ = ["HANDED_FILE", "empty_if_read", "record", "state_of"]

HANDED_FILE = "handed.ndjson"
TRUNCATE_AT = 256 * 1024
STATES = (Receipt.WRITTEN, Receipt.DELIVERED)


def record(log: Path, records: list[SpoolRecord], sid: str, state: Receipt = Receipt.DELIVERED) -> None:
    lines = [{"id": r["id"], "from": r["from"], "sid": sid, "ts": time.time(), "state": state.value}
             for r in records if isinstance(r.get("id"), str) and isinstance(r.get("from"), str)]
    append_records(log, lines)
    if lines:
        ring(bell_path(log))  # the follower sends the `delivered` receipts now, not on its next round


def state_of(line: dict[str, object]) -> Receipt:
    """The state a log line reports; a line from before states were logged meant `delivered`."""
    state = line.get("state")
    return next((s for s in STATES if s.value == state), Receipt.DELIVERED)


def empty_if_read(log: Path, offset: int) -> int:
    """Empty a large log that has been read to its end; returns the offset to keep."""
    try:
        fd = open_private(log, os.O_RDWR)
    except FileNotFoundError:
        return 0
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        size = os.fstat(fd).st_size
        if size == offset and size >= TRUNCATE_AT:
            os.ftruncate(fd, 0)
            os.fsync(fd)
            return 0
        return offset
    finally:
        os.close(fd)
