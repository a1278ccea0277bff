"""The numbers this identity gives the messages it sends: one count per contact.

`sent-seq.json` beside the keys maps each contact's fingerprint to the last number used. A
number is chosen and written under the identity folder's lock, and the file is replaced
durably before the sealed message leaves: two concurrent sends never share a number, and a
number is never reused after a crash (the peer would refuse the second message as a replay).
A send that fails after the write leaves its number unused, which the peer sees as one missing
message. The file grows with contacts, never with messages.

A send that keeps its message in the outbox (`recorded`) writes the count without a sync: the
outbox's own synced record of the message carries its number (`follower.send.outbox`), and it
is on disk before the message can leave, so one sync per message holds both. The unsynced copy
(`sent-seq.live.json`) is rewritten in place (`durable.slots`: one write, where a new file
renamed over the old one made the file system flush it on every send) and names the boot it
was written in (`durable.boot`): in the same boot it is whole, whatever process was killed;
after a crash of the machine it may be old or torn, and the count is then taken again from
`sent-seq.json` (synced whenever it is written) and the highest numbers the outbox records, and
synced once. So a number that may have left is never given again; one that never left may be,
which nobody can tell. An earlier version, finding this file laid out in slots, reads it as
torn and counts again the same way.

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
import json
from collections.abc import Iterator
from pathlib import Path
from typing import TypeGuard

from durable.boot import boot_id
from durable.errors import LocalFileRefused, UserError
from durable.files import read_json, write_json
from durable.locks import folder_locked
from durable.slots import Slotted, read_slotted_json, write_slots

__all__ = ["move_past"]

COUNTER_FILE = "sent-seq.json"
LIVE_FILE = "sent-seq.live.json"  # {"boot": id, "counts": {...}}, in slots, written without a sync
LEGACY_DB = "channels.db"


@contextlib.contextmanager
def next_seq(folder: Path, peer: str, recorded: bool = False) -> Iterator[int]:
    """The next number for a message to `peer`, written only if the block succeeds: a message
    that fails to seal uses up no number. `recorded`: the caller keeps the number in the outbox,
    synced, before the message leaves (`Outbox.sent`), so the count itself needs no sync.

    Raises:
        UserError: the counter file is damaged (it says which file and what to do).
        OSError: it cannot be written (a full disk, say); no number is used.
    """
    with folder_locked(folder):
        counts, live = _counts(folder)
        seq = counts.get(peer, 0) + 1
        yield seq
        counts[peer] = seq
        _save(folder, counts, live, synced=not recorded)


def move_past(folder: Path, peer: str, highest: int) -> bool:
    """Make the next number for `peer` greater than `highest`, the highest the peer says it has
    seen from us (its refusal of a reused number: this folder was restored from a backup, which
    rolled the count back). Never backward; under the same lock as `next_seq`. Whether it moved.

    Raises:
        UserError, OSError: as `next_seq`.
    """
    with folder_locked(folder):
        counts, live = _counts(folder)
        if counts.get(peer, 0) >= highest:
            return False
        counts[peer] = highest
        _save(folder, counts, live, synced=True)
        return True


def _save(folder: Path, counts: dict[str, int], live: Slotted | None, synced: bool) -> Slotted | None:
    """Keep `counts`: always in the live file (after the state `live`, where `_counts` found it;
    None: laid out anew); `synced`, in the synced file first. With no boot id to tell a crash of
    the machine by, every write is synced. Where the live file now holds them."""
    boot = boot_id()
    if synced or boot is None:
        write_json(folder / COUNTER_FILE, counts)
    if boot is None:
        return None
    data = json.dumps({"boot": boot, "counts": counts}, separators=(",", ":")).encode()
    return write_slots(folder / LIVE_FILE, data, live, sync=False)


def _counts(folder: Path) -> tuple[dict[str, int], Slotted | None]:
    """The counts, read under the folder's lock (the caller holds it), and where the live file
    holds them: the live file's when it was written in this boot; else the synced ones raised to
    what the outbox records, synced again."""
    boot = boot_id()
    if boot is None:
        return _synced_counts(folder), None  # every write was synced
    try:
        live, at = read_slotted_json(folder / LIVE_FILE, None)
    except LocalFileRefused:
        live, at = None, None  # torn by a crash of the machine: what the outbox kept says more
    if isinstance(live, dict) and live.get("boot") == boot and _is_counts(live.get("counts")):
        return dict(live["counts"]), at
    counts = _synced_counts(folder)
    from follower.send.outbox import Outbox  # once a boot: the numbers the outbox kept

    for peer, seq in Outbox(folder).highest_seqs().items():
        counts[peer] = max(counts.get(peer, 0), seq)
    # Laid out anew: nothing the file held, torn or from another boot, is written after.
    return counts, _save(folder, counts, None, synced=True)


def _is_counts(value: object) -> TypeGuard[dict[str, int]]:
    return isinstance(value, dict) and all(type(v) is int for v in value.values())


def _synced_counts(folder: Path) -> dict[str, int]:
    path = folder / COUNTER_FILE
    counts = read_json(path, None)
    if counts is None:
        counts = legacy_counts(folder / LEGACY_DB)
    if not _is_counts(counts):
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
