"""The numbers this identity gives the messages it sends: one count per contact.

`sent-seq.json` beside the keys maps each contact's fingerprint to the last number used. A
number is chosen and written under the identity folder's lock, and the file is replaced
durably before the sealed message leaves: two concurrent sends never share a number, and a
number is never reused after a crash (the peer would refuse the second message as a replay).
A send that fails after the write leaves its number unused, which the peer sees as one missing
message. The file grows with contacts, never with messages.

A folder restored from a backup counts from where the backup stood, below numbers its contacts
have seen. A contact refuses each reused number as a replay and says the highest it has seen
(`keys.gate.check_receipts`); `move_past` then moves the count past that, and the refused
message is sent again under a fresh number (`follower.send.resending`).

Counts kept by earlier versions in the channel store (`channels.db`, table `sent_seq`) are
read once, when this file does not exist yet. `talk send` loads this module and nothing of the
channel store's: SQLite and the code that judges arriving mail stay out of every send.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

from durable.errors import UserError
from durable.files import read_json, write_json
from durable.locks import folder_locked

__all__ = ["move_past"]

COUNTER_FILE = "sent-seq.json"
LEGACY_DB = "channels.db"


@contextlib.contextmanager
def next_seq(folder: Path, peer: str) -> Iterator[int]:
    """The next number for a message to `peer`, written only if the block succeeds: a message
    that fails to seal uses up no number.

    Raises:
        UserError: the counter file is damaged (it says which file and what to do).
        OSError: it cannot be written (a full disk, say); no number is used.
    """
    path = folder / COUNTER_FILE
    with folder_locked(folder):
        counts = _counts(folder)
        seq = counts.get(peer, 0) + 1
        yield seq
        counts[peer] = seq
        write_json(path, counts)


def move_past(folder: Path, peer: str, highest: int) -> bool:
    """Make the next number for `peer` greater than `highest`, the highest the peer says it has
    seen from us (its refusal of a reused number: this folder was restored from a backup, which
    rolled the count back). Never backward; under the same lock as `next_seq`. Whether it moved.

    Raises:
        UserError, OSError: as `next_seq`.
    """
    with folder_locked(folder):
        counts = _counts(folder)
        if counts.get(peer, 0) >= highest:
            return False
        counts[peer] = highest
        write_json(folder / COUNTER_FILE, counts)
        return True


def _counts(folder: Path) -> dict[str, int]:
    """The counts, read under the folder's lock (the caller holds it)."""
    path = folder / COUNTER_FILE
    counts = read_json(path, None)
    if counts is None:
        counts = legacy_counts(folder / LEGACY_DB)
    if not isinstance(counts, dict) or not all(type(v) is int for v in counts.values()):
        raise UserError(f"{path} is damaged: it must map fingerprints to numbers; restore it "
                        "from a backup (your contacts would refuse reused numbers as replays)")
    return counts


def legacy_counts(db_path: Path) -> dict[str, int]:
    """The counts an earlier version kept in the channel store; none if it has none."""
    if not db_path.exists():
        return {}
    import sqlite3

    try:
        db = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
        try:
            rows = db.execute("SELECT peer, last FROM sent_seq").fetchall()
        finally:
            db.close()
    except sqlite3.Error as exc:
        if "no such table" in str(exc):
            return {}  # nothing was numbered there
        # Starting again at 1 would make every contact refuse the next messages as replays.
        raise UserError(f"cannot read the send counts in {db_path}: {exc}; try again, or "
                        "restore the file from a backup") from exc
    return {str(peer): int(last) for peer, last in rows}
