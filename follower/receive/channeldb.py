"""One identity's channel state on disk: the ids it has taken and each sender's numbering.
Shared by every reader of the identity (`talk receive`, the follower, `talk send --wait`), so a
message one of them took is known to all.

A small SQLite file (`channels.db`, WAL, 0600) beside the keys. Opening it reads nothing
whole, and each message costs a few indexed lookups and one short transaction, however many
ids it holds; ids older than `KEEP_IDS_S` are deleted as it goes. The first open in a folder
that has a `seen.log` (the text file this replaces) copies its recent ids in once and leaves
the file as it was.

Readers are serialized by `receiving()`, an flock held for a whole receive, so two readers
never both decide that the same message is new. `record` still re-decides inside its own
transaction, so a reader that skipped the lock could at worst show a message, never corrupt
the state. The receive order is `judge` → hand on → `record` → ack: a crash before `record`
shows the message again (it was never acked), a crash after it only costs the ack.

The numbers this identity gives what it sends are not here: `follower.send.seqcounter` keeps them
(this file's `sent_seq` table, where earlier versions kept them, is read once on the way).
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from durable.errors import TalkError
from durable.locks import kept_locked
from follower.receive.sequence import (
    KEEP_IDS_S,
    Channel,
    Gap,
    Judgement,
    SequenceVerdict,
    judge,
    unknown_start,
)
from keys.contacts import ContactBook
from keys.envelope import Inner

__all__ = ["ChannelDB", "SpoolDedup", "last_spooled", "missing_mail", "receiving"]

DB_FILE = "channels.db"
LEGACY_FILE = "seen.log"
LOCK_FILE = "receive.lock"
BUSY_TIMEOUT_S = 30.0
SPOOL_TAIL_BYTES = 64 * 1024  # far more than the one delivery a killed follower can leave unrecorded

SCHEMA = """
CREATE TABLE IF NOT EXISTS seen (id TEXT PRIMARY KEY, at REAL NOT NULL) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS seen_at ON seen (at);
CREATE TABLE IF NOT EXISTS channel (sender TEXT PRIMARY KEY, highest INTEGER, gaps TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
"""


@contextlib.contextmanager
def receiving(folder: Path) -> Iterator[None]:
    """Hold the identity's receive lock: one reader at a time takes its mail. (The identity
    folder was checked private when the session opened it.) Its file stays open between holds
    (`kept_locked`): a follower takes it for every message it is pushed."""
    with kept_locked(folder / LOCK_FILE):
        yield


def _connect(path: Path) -> sqlite3.Connection:
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
    os.close(fd)  # created 0600 before SQLite opens it; its -wal and -shm files copy the mode
    # The follower's loop and its push thread take turns with it (`Follower.turn`), never at once.
    db = sqlite3.connect(path, timeout=BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=NORMAL")  # durable across a crash of the process
    return db


@contextlib.contextmanager
def _failures(path: Path) -> Iterator[None]:
    """A store that cannot be read or written is a fault of this machine: one line, no traceback."""
    try:
        yield
    except (sqlite3.Error, OSError) as exc:
        raise TalkError(f"cannot use {path}: {exc}; check the disk's free space and the file's "
                        "permissions (a damaged file may be moved aside: talk starts a new one)") from exc


class ChannelDB:
    """Raises TalkError (from every method) when the file cannot be read or written."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.path = folder / DB_FILE
        self._pruned = False
        self._in_page = False
        with _failures(self.path):
            self.db = _connect(self.path)
            if self._meta("created") is None:
                self._create()

    def close(self) -> None:
        self.db.close()

    @contextlib.contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        """One transaction; inside `page`, a savepoint of the page's transaction."""
        begin, commit, undo = (("SAVEPOINT one", "RELEASE one", "ROLLBACK TO one; RELEASE one")
                               if self._in_page else ("BEGIN IMMEDIATE", "COMMIT", "ROLLBACK"))
        with _failures(self.path):
            self.db.execute(begin)
            try:
                yield self.db
            except BaseException:
                for statement in undo.split("; "):
                    self.db.execute(statement)
                raise
            self.db.execute(commit)

    @contextlib.contextmanager
    def page(self) -> Iterator[None]:
        """Everything recorded inside is committed together when the block ends, or not at all.

        The follower wraps each fetched page in this, around `Spool.batch`: the spool's lines
        are synced before the ids are committed here, and both before the page is acked, so a
        power cut cannot leave an id taken whose line is lost."""
        with _failures(self.path):
            self.db.execute("BEGIN IMMEDIATE")
        self._in_page = True
        try:
            yield
        except BaseException:
            self._in_page = False
            with _failures(self.path):
                self.db.execute("ROLLBACK")
            raise
        self._in_page = False
        with _failures(self.path):
            self.db.execute("COMMIT")

    def _meta(self, key: str) -> str | None:
        try:
            row = self.db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        except sqlite3.OperationalError:
            return None  # no tables yet
        return None if row is None else str(row[0])

    def _create(self) -> None:
        """Tables, plus what this identity knew before the store existed: contacts that may
        have numbered mail already, and the recent ids of seen.log."""
        with self._write() as db:
            for statement in SCHEMA.strip().split(";"):
                if statement.strip():
                    db.execute(statement)
            if db.execute("SELECT 1 FROM meta WHERE key = 'created'").fetchone():
                return  # another process got here first
            now = time.time()
            unknown = _save_channel(unknown_start())
            db.executemany("INSERT OR IGNORE INTO channel VALUES (?, ?, ?)",
                           [(c.fingerprint, *unknown) for c in ContactBook(self.folder).all()])
            db.executemany("INSERT OR IGNORE INTO seen VALUES (?, ?)",
                           legacy_ids(self.folder / LEGACY_FILE, now - KEEP_IDS_S))
            db.execute("INSERT INTO meta VALUES ('created', ?)", (str(now),))

    def __contains__(self, msg_id: object) -> bool:
        return isinstance(msg_id, str) and self._known(msg_id)

    def _known(self, msg_id: str) -> bool:
        with _failures(self.path):
            return self.db.execute("SELECT 1 FROM seen WHERE id = ?", (msg_id,)).fetchone() is not None

    def add(self, msg_id: str) -> None:
        """Remember an id outside any sender's numbering (a contact request)."""
        with self._write() as db:
            db.execute("INSERT OR IGNORE INTO seen VALUES (?, ?)", (msg_id, time.time()))

    def channel(self, sender: str) -> Channel:
        with _failures(self.path):
            row = self.db.execute("SELECT highest, gaps FROM channel WHERE sender = ?", (sender,)).fetchone()
        return Channel() if row is None else _load_channel(row[0], row[1])

    def judge(self, sender: str, inner: Inner, now: float) -> Judgement:
        """What `inner` from `sender` is; nothing is written."""
        return judge(self.channel(sender), inner.seq, inner.ts, self._known(inner.id), now)

    def record(self, sender: str, inner: Inner, now: float) -> Judgement:
        """Judge again under the write lock and, if accepted, remember the id and the numbering."""
        with self._write() as db:
            decision = self.judge(sender, inner, now)
            if decision.verdict.accepted:
                db.execute("INSERT OR IGNORE INTO seen VALUES (?, ?)", (inner.id, now))
                db.execute("INSERT OR REPLACE INTO channel VALUES (?, ?, ?)",
                           (sender, *_save_channel(decision.after)))
            if not self._pruned:
                self._pruned = True  # once per process is enough: ids expire in days
                db.execute("DELETE FROM seen WHERE at < ?", (now - KEEP_IDS_S,))
        return decision

    def missing(self, now: float) -> dict[str, int]:
        """Per sender fingerprint, how many of its messages have not come (only senders with some)."""
        with _failures(self.path):
            rows = self.db.execute("SELECT sender, highest, gaps FROM channel WHERE gaps != '[]'").fetchall()
        counts = {sender: _load_channel(h, g).missing(now) for sender, h, g in rows}
        return {sender: n for sender, n in counts.items() if n}


class SpoolDedup:
    """The shared store, with the spool as the follower's crash-safe record of what it wrote.

    The follower writes a message to the spool, then records it here, then acks it. Killed in
    between, it leaves one id in the spool but not here, and the message still on the relay:
    whoever fetches it next (the follower again, or `talk receive`) asks `spooled` too, records
    it here as it should have been, and treats it as the duplicate it is.
    """

    def __init__(self, store: ChannelDB, spooled: Callable[[str], bool]) -> None:
        self.store = store
        self.spooled = spooled

    def __contains__(self, msg_id: object) -> bool:
        return msg_id in self.store or (isinstance(msg_id, str) and self.spooled(msg_id))

    def add(self, msg_id: str) -> None:
        self.store.add(msg_id)

    def judge(self, sender: str, inner: Inner, now: float) -> Judgement:
        decision = self.store.judge(sender, inner, now)
        if decision.verdict is SequenceVerdict.DUPLICATE or not self.spooled(inner.id):
            return decision
        self.store.record(sender, inner, now)
        return Judgement(SequenceVerdict.DUPLICATE, decision.after, reason="already received")

    def record(self, sender: str, inner: Inner, now: float) -> Judgement:
        return self.store.record(sender, inner, now)


def last_spooled(folder: Path) -> frozenset[str]:
    """The ids a follower delivered last, from the tail of its spool's index (a reader that is
    not the follower need not read the whole history: see SpoolDedup)."""
    from spool_writer.peek import INDEX_FILE

    try:
        fd = os.open(folder / "spool" / INDEX_FILE, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return frozenset()  # no follower ever ran here: nothing more to load
    from spool_writer import index, lines

    try:
        start = max(0, os.fstat(fd).st_size - SPOOL_TAIL_BYTES)
        data = lines.read_from(fd, start)
    finally:
        os.close(fd)
    if start:
        data = data[data.find(b"\n") + 1:]  # the first line is cut
    entries, _ = index.parse(data)
    return frozenset(msg_id for _, msg_id, target in entries if target is None)


def legacy_ids(path: Path, since: float) -> list[tuple[str, float]]:
    """The (id, epoch) lines of a seen.log newer than `since`; torn or odd lines skipped."""
    try:
        text = path.read_text(errors="replace")
    except FileNotFoundError:
        return []
    ids = []
    for line in text.splitlines():
        stamp, _, msg_id = line.partition(" ")
        try:
            at = float(stamp)
        except ValueError:
            continue
        if msg_id and at > since:
            ids.append((msg_id, at))
    return ids


def _save_channel(channel: Channel) -> tuple[int | None, str]:
    return channel.highest, json.dumps([[g.lo, g.hi, g.noticed] for g in channel.gaps])


def _load_channel(highest: int | None, gaps: str) -> Channel:
    return Channel(highest, tuple(Gap(int(lo), int(hi), float(at)) for lo, hi, at in json.loads(gaps)))


def missing_mail(folder: Path, now: float) -> dict[str, int]:
    """`ChannelDB.missing` of the identity in `folder`, without creating a store it lacks."""
    if not (folder / DB_FILE).exists():
        return {}
    store = ChannelDB(folder)
    try:
        return store.missing(now)
    finally:
        store.close()
