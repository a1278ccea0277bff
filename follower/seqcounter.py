"""The numbers this identity gives the messages it sends: one count per contact.

The count lives in the identity's channel store (`channels.db`, see `follower.channeldb`), in
its own table. `talk send` needs nothing else of that store, so this module is all it loads:
the store's schema, and the code that judges arriving mail, stay out of every send.

A number is committed (fsynced) in the same immediate transaction that chose it, before the
sealed message leaves: two concurrent sends never share one, and a number lost to a power cut
is never reused (the peer would refuse the second message as a replay). A send that fails after
the commit leaves its number unused, which the peer sees as one missing message.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from collections.abc import Iterator
from pathlib import Path

from keys.errors import TalkError

DB_FILE = "channels.db"
BUSY_TIMEOUT_S = 30.0
TABLE = "CREATE TABLE IF NOT EXISTS sent_seq (peer TEXT PRIMARY KEY, last INTEGER NOT NULL)"


def connect(path: Path) -> sqlite3.Connection:
    """The store at `path`, created 0600 if missing, in WAL mode."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
    os.close(fd)  # created 0600 before SQLite opens it; its -wal and -shm files copy the mode
    db = sqlite3.connect(path, timeout=BUSY_TIMEOUT_S, isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=NORMAL")  # durable across a crash of the process; see counting
    return db


@contextlib.contextmanager
def failures(path: Path) -> Iterator[None]:
    """A store that cannot be read or written is a fault of this machine: one line, no traceback."""
    try:
        yield
    except (sqlite3.Error, OSError) as exc:
        raise TalkError(f"cannot use {path}: {exc}; check the disk's free space and the file's "
                        "permissions (a damaged file may be moved aside: talk starts a new one)") from exc


@contextlib.contextmanager
def transaction(db: sqlite3.Connection, path: Path) -> Iterator[sqlite3.Connection]:
    """One immediate (write-locked from the start) transaction, rolled back on any exception."""
    with failures(path):
        db.execute("BEGIN IMMEDIATE")
        try:
            yield db
        except BaseException:
            db.execute("ROLLBACK")
            raise
        db.execute("COMMIT")


@contextlib.contextmanager
def counting(db: sqlite3.Connection, path: Path, peer: str) -> Iterator[int]:
    """The next number for a message to `peer` on an open store, committed only if the block
    succeeds: a message that fails to seal uses up no number."""
    db.execute("PRAGMA synchronous=FULL")  # a number lost to a power cut would be reused
    try:
        with transaction(db, path):
            row = db.execute("SELECT last FROM sent_seq WHERE peer = ?", (peer,)).fetchone()
            seq = 1 if row is None else int(row[0]) + 1
            yield seq
            db.execute("INSERT OR REPLACE INTO sent_seq VALUES (?, ?)", (peer, seq))
    finally:
        db.execute("PRAGMA synchronous=NORMAL")


@contextlib.contextmanager
def next_seq(folder: Path, peer: str) -> Iterator[int]:
    """`counting` on the identity's store in `folder`, opened for this one number.

    Raises:
        TalkError: the store cannot be opened, read or written.
    """
    path = folder / DB_FILE
    with failures(path):
        db = connect(path)
    try:
        with failures(path):
            db.execute(TABLE)  # a store made by a send alone; `ChannelDB` adds the rest when it opens
        with counting(db, path, peer) as seq:
            yield seq
    finally:
        db.close()
