"""The sender's outbox: every message sent, and how far it got.

An append-only log of events (sent, stored, resent, recovered, a receipt's state) folded into one entry per
message. States only move forward:

    sent → stored → held → spooled → written → delivered        (refused / expired / dropped: final)

`written` (a door handed it over through a channel that gives no verdict) is not final: `delivered` may
follow when the host confirms the message reached its model whole.

`recovered`: the receiver refused the message for a reason that sending it again can cure (it
lost the Olm session, could not open it in the one it holds, or our number was rolled back:
`follower.send.resending`); it was sealed again, under the same id, and is on its way again (`sent`).
The entry counts the copies (`sends`) and keeps how the last went (`way`) and which receipt
brought it back (`answered`, so a receipt taken again after a kill brings nothing back twice).
Past `follower.send.resending.MAX_SENDS` copies a refusal is final.

`duplicate` (the peer already had it: a resend crossed a lost receipt) counts as spooled. The
sealed blob is kept until the message is spooled, so a resend repeats the very same message id
and the peer's dedup makes it harmless.

Two files, so that no command's cost grows with the number of messages ever sent:

    outbox.ndjson          the working log: messages still on their way, and the last ones
                           that settled, until the log is next compacted
    outbox-history.ndjson  every settled message, one line each, appended at compaction

A "sent" event, and a "recovered" one that renumbered its message, carry the message's number
(`seq`): synced before the message leaves, they are what keeps a number from being given twice
after a crash of the machine (`follower.send.seqcounter`), and a compaction keeps the highest
of each contact in its second line. "stored" is appended without a sync: lost, the message
reads as not yet stored, and is deposited again under its id, which the peer drops.

A message settles when it reaches a final state (delivered, or refused, expired, dropped), or
once it has sat held or spooled for SETTLE_AFTER_S: a receipt that comes after that is not
recorded (`talk outbox --all` shows the state it settled in). Compaction runs when the working
log outgrows COMPACT_BYTES (or twice what the last compaction left, when that is more: a crowd
of messages in flight must not make every append rewrite them all). It appends the settled
entries to the history first, then replaces the working log, so a crash in between leaves an
entry in both, which reading folds into one.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from durable.files import open_private, replace_file
from durable.locks import locked
from durable.message_ids import resolve
from durable.ndjson import append_records, append_to, json_lines, read_records
from keys import gate

__all__ = [
    "HISTORY_FILE",
    "OUTBOX_FILE",
    "RECENT_BYTES",
    "REFUSALS",
    "RESEND_AFTER_S",
    "Entry",
    "Outbox",
    "fold",
]

OUTBOX_FILE = "outbox.ndjson"
HISTORY_FILE = "outbox-history.ndjson"
# Present while some message is queued (the relay did not take it): the next command that talks
# to the relay sends it, after one look at this file instead of a read of the whole outbox.
QUEUED_MARK = "outbox.queued"
COMPACT_BYTES = 256 * 1024
SETTLE_AFTER_S = 2 * 86400
RECENT_BYTES = 256 * 1024  # of the history's tail, for `talk outbox` without --all
PREVIEW = 200
RANK = {"sent": 0, "stored": 1, "held": 2, "refused": 2.5, "expired": 2.5, "dropped": 2.5,
        "spooled": 3, "written": 3.5, "delivered": 4}
REFUSALS = frozenset({"refused", "expired", "dropped"})  # final, and the message never got through
RECEIPT_STATES = frozenset(gate.RECEIPT_STATES)
RESEND_AFTER_S = 30.0
MAX_ATTEMPTS = 8


@dataclass
class Entry:
    id: str
    to: str
    name: str
    kind: str
    text: str
    ts: float
    state: str = "sent"
    reason: str = ""
    updated: float = 0.0
    attempts: int = 1
    last_attempt: float = 0.0
    tag: str = ""
    blob: str = ""
    recovered: float = 0.0  # when it was last sent again after a refusal (`follower.send.resending`)
    sends: int = 1  # copies sent: the first, and one per refusal that brought it back
    way: str = ""  # how the last copy was sent again (`follower.send.resending.Way`)
    answered: str = ""  # the id of the receipt whose refusal brought it back last
    extra: dict[str, Any] = field(default_factory=dict)

    def public(self) -> dict[str, Any]:
        """What `talk outbox --json` shows (no ciphertext)."""
        shown = {k: v for k, v in self.__dict__.items() if k not in ("tag", "blob", "extra")}
        return {**self.extra, **shown}

    def waiting_for_receipt(self) -> bool:
        return RANK[self.state] < RANK["held"]

    def settled(self, now: float) -> bool:
        """Done with: nothing more will be sent, and no receipt is still worth waiting for."""
        if self.state == "delivered" or self.state in REFUSALS:
            return True
        return not self.waiting_for_receipt() and now - self.updated > SETTLE_AFTER_S

    def snapshot(self) -> dict[str, Any]:
        """The entry as one "entry" event; without its ciphertext once nothing will resend it."""
        return {**self.__dict__, "ev": "entry", "blob": self.blob if self.waiting_for_receipt() else ""}

    def resend_due(self, now: float, after: float) -> bool:
        """Unacknowledged, not given up on, and its backoff (doubling from `after`) is over."""
        backoff = after * 2 ** (self.attempts - 1)
        return (self.waiting_for_receipt() and bool(self.blob) and self.attempts < MAX_ATTEMPTS
                and now - self.last_attempt >= backoff)


def advance(entry: Entry, state: str, reason: str, ts: float) -> None:
    """Apply a state to an entry if it moves it forward (pure: folding is order-tolerant)."""
    if state == "duplicate":
        state, reason = "spooled", reason or "the peer already had it"
    if state not in RANK or RANK[state] <= RANK[entry.state]:
        return
    entry.state, entry.reason, entry.updated = state, reason, ts


def fold(events: list[dict[str, Any]], entries: dict[str, Entry] | None = None) -> dict[str, Entry]:
    """The entries `events` describe; with `entries`, folded into those (a reader following the
    log folds only its new events). A snapshot of a message already known (after a compaction,
    or the crash that leaves one in both files) only moves that entry forward."""
    entries = {} if entries is None else entries
    for event in events:
        kind, msg_id = event.get("ev"), event.get("id")
        if not isinstance(msg_id, str):
            continue
        if kind in ("sent", "entry"):
            known = entries.get(msg_id)
            if known is None:
                entries[msg_id] = _entry(event)
            elif kind == "entry":
                advance(known, str(event.get("state", "")), str(event.get("reason", "")),
                        float(event.get("updated", 0)))
            continue
        entry = entries.get(msg_id)
        if entry is None:
            continue
        ts = float(event.get("ts", 0))
        if kind == "recovered":
            _recover(entry, event, ts)
        elif kind == "resent":
            entry.attempts += 1
            entry.last_attempt = ts
        elif kind in ("stored", "receipt"):
            advance(entry, str(event.get("state", "stored")), str(event.get("reason", "")), ts)
    return entries


def _recover(entry: Entry, event: dict[str, Any], ts: float) -> None:
    """Sent again after a refusal: on its way once more, as copy number `sends` (an event of an
    earlier version, which sent a message again once, is copy 2)."""
    sends = event.get("sends", 2)
    if entry.state not in REFUSALS or type(sends) is not int or sends <= entry.sends:
        return
    entry.state, entry.updated = "sent", ts
    entry.reason = str(event.get("reason", "")) or "sent again in a new session"
    entry.tag, entry.blob = str(event.get("tag", "")), str(event.get("blob", ""))
    entry.sends, entry.way, entry.answered = sends, str(event.get("way", "")), str(event.get("answered", ""))
    entry.recovered = entry.last_attempt = ts
    entry.attempts = 1  # a new blob: its own deposits, from the first


def _entry(event: dict[str, Any]) -> Entry:
    core = {k: event[k] for k in Entry.__dataclass_fields__ if k in event}
    entry = Entry(**{"name": "", "kind": "chat", "text": "", "ts": 0.0, "to": "", **core})
    entry.last_attempt = entry.last_attempt or entry.ts
    entry.updated = entry.updated or entry.ts
    return entry


class Outbox:
    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.path = folder / OUTBOX_FILE
        self.lock = folder / "outbox.lock"
        self.history = folder / HISTORY_FILE

    def _append(self, events: list[dict[str, Any]], sync: bool = True) -> None:
        # A lock of its own: compaction replaces the log, so its inode cannot hold the lock.
        with locked(self.lock):
            fd = open_private(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT)
            try:
                append_to(fd, json_lines(events))
                if sync:
                    os.fsync(fd)
                size = os.fstat(fd).st_size
                due = size > COMPACT_BYTES and size > 2 * _compacted_size(fd)
            finally:
                os.close(fd)
            if due:
                self._compact()

    def _compact(self) -> None:
        """Move settled entries to the history; the rest become one line per message."""
        now = time.time()
        events = read_records(self.path)
        entries = fold(events)
        done = [e.snapshot() for e in entries.values() if e.settled(now)]
        append_records(self.history, done)
        kept = json_lines([e.snapshot() for e in entries.values() if not e.settled(now)])
        # The numbers on a line of their own: the first line stays short (`_compacted_size`).
        highest = highest_seqs(events)
        seqs = json_lines([{"ev": "seqs", "seqs": highest}]) if highest else b""
        header = json_lines([{"ev": "compacted", "bytes": len(kept) + len(seqs), "ts": now}]) + seqs
        replace_file(self.path, header + kept)

    def sent(self, msg_id: str, to: str, name: str, kind: str, text: str, tag: str, blob: str,
             *, seq: int | None = None, **extra: Any) -> None:
        """Record a message before it leaves, synced, with its number (`seq`) when it has one."""
        now = time.time()
        event = {"ev": "sent", "id": msg_id, "to": to, "name": name, "kind": kind,
                 "text": text[:PREVIEW], "ts": now, "tag": tag, "blob": blob, "extra": extra}
        self._append([event if seq is None else {**event, "seq": seq}])

    def stored(self, msg_id: str) -> None:
        self._append([{"ev": "stored", "id": msg_id, "state": "stored", "ts": time.time()}], sync=False)

    def highest_seqs(self) -> dict[str, int]:
        """The highest number the working log records for each contact (reads it all)."""
        return highest_seqs(read_records(self.path))

    @property
    def queued_mark(self) -> Path:
        return self.folder / QUEUED_MARK

    def queued(self) -> None:
        """Note that a message waits to be deposited (see QUEUED_MARK)."""
        self.queued_mark.touch(mode=0o600)

    def recovered(self, msg_id: str, tag: str, blob: str, sends: int, way: str, reason: str,
                  answered: str, renumbered: tuple[str, int] | None = None) -> None:
        """`msg_id` is sent again, sealed anew as `blob` (copy number `sends`, sent again in the
        way `way`), after the refusal in the receipt `answered`; `renumbered`: (contact, the new
        number), kept as `sent` keeps it."""
        event = {"ev": "recovered", "id": msg_id, "tag": tag, "blob": blob, "sends": sends,
                 "way": way, "reason": reason, "answered": answered, "ts": time.time()}
        if renumbered is not None:
            event |= {"to": renumbered[0], "seq": renumbered[1]}
        self._append([event])

    def resent(self, msg_id: str) -> None:
        self._append([{"ev": "resent", "id": msg_id, "ts": time.time()}])

    def receipts(self, items: list[tuple[str, str, str]]) -> None:
        """(message id, state, reason) as a peer reported them."""
        now = time.time()
        self._append([{"ev": "receipt", "id": i, "state": s, "reason": r, "ts": now} for i, s, r in items])

    def entries(self) -> dict[str, Entry]:
        """The working log's messages: all still on their way, and some settled ones."""
        return fold(read_records(self.path))

    def recent(self) -> dict[str, Entry]:
        """The working log and the newest part of the history (RECENT_BYTES of it)."""
        return fold(read_records(self.history, RECENT_BYTES) + read_records(self.path))

    def everything(self) -> dict[str, Entry]:
        """Every message ever sent from here (reads the whole history)."""
        return fold(read_records(self.history) + read_records(self.path))

    def find(self, msg_id: str) -> Entry | None:
        """The entry of the message `msg_id`; the history is read only for an id the working
        log does not know."""
        for read in (self.entries, self.everything):
            entry = read().get(msg_id)
            if entry is not None:
                return entry
        return None

    def pick(self, typed: str) -> Entry:
        """The entry a person named by its id or an unambiguous prefix (`message_ids`); a
        prefix reads the whole history, where it may begin another id too.

        Raises:
            UserError: `typed` is no id, or a prefix of several.
            NotFound: no message sent from here has that id.
        """
        entry = self.find(typed)
        if entry is not None:
            return entry
        entries = self.everything()
        return entries[resolve(typed, entries, "sent message", "`talk outbox` lists them")]


def highest_seqs(events: list[dict[str, Any]]) -> dict[str, int]:
    """The highest number each contact was given, as `events` record it: those of the messages
    sent or renumbered, and what the compaction that began the log kept."""
    highest: dict[str, int] = {}

    def keep(peer: object, seq: object) -> None:
        if isinstance(peer, str) and type(seq) is int:
            highest[peer] = max(highest.get(peer, 0), seq)

    for event in events:
        kind = event.get("ev")
        if kind in ("sent", "recovered"):
            keep(event.get("to"), event.get("seq"))
        elif kind == "seqs" and isinstance(event.get("seqs"), dict):
            for peer, seq in event["seqs"].items():
                keep(peer, seq)
    return highest


def _compacted_size(fd: int) -> int:
    """What the last compaction left in the working log, from its first line (0 if none)."""
    head = os.pread(fd, 128, 0)
    try:
        first = json.loads(head[:head.index(b"\n")])
    except ValueError:
        return 0
    size = first.get("bytes") if isinstance(first, dict) and first.get("ev") == "compacted" else 0
    return size if isinstance(size, int) else 0
