"""The embedded store: one SQLite file in WAL mode.

`synchronous=NORMAL` under WAL survives a crash of the relay process (what the tests kill);
only a power cut can lose the last commits, and the sender still holds what it sent.
Calls are short transactions run on the event loop's thread: at this size they cost tens of
microseconds, less than handing them to a thread pool.

Deposits and acks are group-committed: the ones that arrive in the same turn of the event
loop share one transaction (its BEGIN and COMMIT cost more than the rows), and each caller
is answered only after that commit.

A deposit is decided before its row is written: the quotas are running totals in memory
(`relay.totals`, rebuilt from the mail at every start), and the id is the next of a counter
this process owns (one relay process per file: `_only_relay` holds a lock beside it), so
the relay can announce the mail to its owner's streams while the group commits (`deposit`'s
`announce`). The announcement is a copy, as every push is: should the commit fail, the sender
is answered with an error and sends the same message again, which the owner's follower knows.

Each mail row says whether its tag was registered (`known`). The file, and the -wal and -shm
files SQLite creates with the file's mode, are 0600.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

from durable.errors import UserError
from durable.locks import hold_for_life
from relay.checkpoints import BACKSTOP_PAGES, Checkpointer
from relay.sqlite_files import SqliteFiles
from relay.store import MOST_TAGS, Announce, Claimed, Deposited, DepositOutcome, Mail, RedeemOutcome
from relay.totals import Hold, MailboxTotals

T = TypeVar("T")

SCHEMA = """
CREATE TABLE IF NOT EXISTS bundles (fp TEXT PRIMARY KEY, bundle TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS mail (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    fp TEXT NOT NULL, tag TEXT NOT NULL, blob BLOB NOT NULL, created REAL NOT NULL,
    known INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS mail_box ON mail (fp, tag, id);
CREATE INDEX IF NOT EXISTS mail_age ON mail (created);
CREATE TABLE IF NOT EXISTS known (
    fp TEXT NOT NULL, tag TEXT NOT NULL, PRIMARY KEY (fp, tag)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS nonces (
    fp TEXT NOT NULL, nonce TEXT NOT NULL, seen REAL NOT NULL, PRIMARY KEY (fp, nonce)
);
CREATE TABLE IF NOT EXISTS ratchet_cards (
    fp TEXT PRIMARY KEY, card TEXT NOT NULL, fallback TEXT, high INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS ratchet_keys (
    fp TEXT NOT NULL, id INTEGER NOT NULL, key TEXT NOT NULL, PRIMARY KEY (fp, id)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS invites (
    tag TEXT PRIMARY KEY, fp TEXT NOT NULL, expires REAL NOT NULL, used INTEGER NOT NULL DEFAULT 0
);
"""
# Where relays before the totals moved to memory (`relay.totals`) kept them.
OLD_TOTALS = "DROP TABLE IF EXISTS boxes; DROP TABLE IF EXISTS channels;"
PRIVATE = 0o600
log = logging.getLogger("talk.relay")


def _private_file(path: Path) -> None:
    """Create the database file 0600 (or tighten an older one) before SQLite opens it."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.close(os.open(path, os.O_CREAT | os.O_RDWR, PRIVATE))
    for each in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
        if each.exists() and each.stat().st_mode & 0o777 != PRIVATE:
            try:
                each.chmod(PRIVATE)
            except OSError as exc:  # another user's file: say so, but serve
                log.warning("relay: cannot make %s private (%s); run chmod 600 on it", each, exc)


def _only_relay(path: Path) -> int:
    """The file's lock, held while this store is open: the id counter is this process's.

    Raises:
        UserError: another relay process serves the file.
    """
    fd = hold_for_life(path.with_name(path.name + ".lock"))
    if fd is None:
        raise UserError(f"another relay process serves {path}; stop it, or give this relay a "
                        "database of its own")
    return fd


class SqliteStore:
    def __init__(self, path: Path | str) -> None:
        self.path = str(path)
        self._lock: int | None = None
        if self.path != ":memory:":
            _private_file(Path(self.path))
            self._lock = _only_relay(Path(self.path))
        self.db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=NORMAL")
        self.db.execute("PRAGMA secure_delete=ON")  # acked ciphertext does not linger in free pages
        # Checkpoints run on a thread (`relay.checkpoints`); this connection's only past a backstop.
        self.checkpoints = None if self.path == ":memory:" else Checkpointer(self.path)
        if self.checkpoints is not None:
            self.db.execute(f"PRAGMA wal_autocheckpoint={BACKSTOP_PAGES}")
        self.db.executescript(SCHEMA)
        columns = {row[1] for row in self.db.execute("PRAGMA table_info(mail)")}
        if "known" not in columns:  # a file from before tags were registered: all of it unknown
            self.db.execute("ALTER TABLE mail ADD COLUMN known INTEGER NOT NULL DEFAULT 0")
        self.totals = MailboxTotals()
        self._recount()
        # The last id given out: AUTOINCREMENT's, which never goes back, even past deleted rows.
        row = self.db.execute("SELECT seq FROM sqlite_sequence WHERE name = 'mail'").fetchone()
        self._last_id = int(row[0]) if row else 0
        self._pending: list[tuple[Callable[[], Any], asyncio.Future[Any]]] = []
        self.files = SqliteFiles(self.db, self._grouped)

    async def _grouped(self, op: Callable[[], T]) -> T:
        """Run `op` inside the next group transaction; return once that has committed."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        self._pending.append((op, future))
        if len(self._pending) == 1:
            # Behind whatever the loop has ready: a stream told of a deposit writes its frame first.
            loop.call_soon(self._commit_group)
        return await future

    def _commit_group(self) -> None:
        group, self._pending = self._pending, []
        self._commit(group)

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[None]:
        """One write transaction; the totals it moved stay only if it commits."""
        try:
            with self.db:
                self.db.execute("BEGIN IMMEDIATE")
                yield
        except BaseException:
            self.totals.undo()
            raise
        self.totals.keep()

    def _commit(self, group: list[tuple[Callable[[], Any], asyncio.Future[Any]]]) -> None:
        try:
            with self._transaction():
                results = [op() for op, _ in group]
        except Exception as exc:
            if len(group) != 1:  # one bad op must not fail the others: run each alone
                for one in group:
                    self._commit([one])
            elif not group[0][1].done():  # handed to the one caller it belongs to
                group[0][1].set_exception(exc)
            return
        if self.checkpoints is not None:
            self.checkpoints.committed()
        for (_, future), result in zip(group, results, strict=True):
            if not future.done():  # its caller may have gone away (client disconnected)
                future.set_result(result)

    def _recount(self) -> None:
        """Rebuild the running totals from the mail itself, once per start: exact, whatever an
        older relay or a crash left behind (caps are checked on every deposit; summing a
        mailbox's rows there cost ~270 µs at a hundred waiting messages)."""
        self.db.executescript(OLD_TOTALS)
        self.totals.load(
            self.db.execute("SELECT fp, SUM(known), SUM(known * LENGTH(blob)), SUM(1 - known), "
                            "SUM((1 - known) * LENGTH(blob)) FROM mail GROUP BY fp").fetchall(),
            self.db.execute("SELECT fp, tag, COUNT(*), SUM(LENGTH(blob)) FROM mail "
                            "GROUP BY fp, tag").fetchall(),
        )

    async def put_bundle(self, fp: str, bundle: str) -> None:
        self.db.execute("INSERT OR REPLACE INTO bundles (fp, bundle) VALUES (?, ?)", (fp, bundle))

    async def get_bundle(self, fp: str) -> str | None:
        row = self.db.execute("SELECT bundle FROM bundles WHERE fp = ?", (fp,)).fetchone()
        return row[0] if row else None

    def _known(self, fp: str, tag: str) -> bool:
        row = self.db.execute("SELECT 1 FROM known WHERE fp = ? AND tag = ?", (fp, tag)).fetchone()
        return row is not None

    def _insert(self, fp: str, tag: str, blob: bytes, now: float, known: bool,
                mail_id: int | None = None) -> str:
        """Write a row under `mail_id`, else the counter's next: never AUTOINCREMENT's own, which
        could take the id of a deposit decided and not yet written."""
        if mail_id is None:
            mail_id = self._next_id()
        self.db.execute(
            "INSERT INTO mail (id, fp, tag, blob, created, known) VALUES (?, ?, ?, ?, ?, ?)",
            (mail_id, fp, tag, blob, now, int(known)),
        )
        self.totals.count(fp, tag, known, 1, len(blob))
        return str(mail_id)

    def _next_id(self) -> int:
        self._last_id += 1
        return self._last_id

    async def deposit(
        self, fp: str, tag: str, blob: bytes, now: float, max_messages: int, max_bytes: int,
        max_unknown: int | None = None, max_unknown_bytes: int | None = None,
        max_tag: int | None = None, max_tag_bytes: int | None = None,
        announce: Announce | None = None, registered: bool = False,
    ) -> Deposited:
        known = registered or self._known(fp, tag)
        totals, size = self.totals, len(blob)
        if known and not totals.tag_room(fp, tag, size, max_tag, max_tag_bytes):
            return Deposited(DepositOutcome.TAG_FULL, "")
        if known and not totals.room(fp, True, size, max_messages, max_bytes):
            return Deposited(DepositOutcome.MAILBOX_FULL, "")
        if not known and not totals.room(fp, False, size, max_unknown or max_messages,
                                         max_unknown_bytes or max_bytes):
            return Deposited(DepositOutcome.UNKNOWN_FULL, "")
        hold = totals.hold(fp, tag, known, size)  # counted now: the next deposit sees it
        mail_id = self._next_id()
        if announce is not None:
            try:
                await announce(str(mail_id))  # before the op is queued: its frame goes first
            except BaseException:
                totals.release(hold)
                raise
        # Registered or not as the group finds it: a registration queued first moves it too.
        await self._grouped(lambda: self._write(hold, blob, now, mail_id))
        return Deposited(DepositOutcome.STORED, str(mail_id), woken=announce is not None)

    def _write(self, hold: Hold, blob: bytes, now: float, mail_id: int) -> None:
        self.totals.release(hold)
        known = hold.known or self._known(hold.fp, hold.tag)  # a tag never stops being registered
        self._insert(hold.fp, hold.tag, blob, now, known, mail_id)

    async def register_tags(self, fp: str, tags: list[str], most: int) -> None:
        await self._grouped(lambda: self._register(fp, tags, most))

    def _register(self, fp: str, tags: list[str], most: int) -> None:
        have = int(self.db.execute("SELECT COUNT(*) FROM known WHERE fp = ?", (fp,)).fetchone()[0])
        for tag in dict.fromkeys(tags):
            if have >= most:
                return
            if self.db.execute(
                "INSERT OR IGNORE INTO known (fp, tag) VALUES (?, ?)", (fp, tag)
            ).rowcount != 1:
                continue
            have += 1
            sizes = self.db.execute(
                "UPDATE mail SET known = 1 WHERE fp = ? AND tag = ? AND known = 0 "
                "RETURNING LENGTH(blob)", (fp, tag),
            ).fetchall()
            if sizes:
                moved = sum(size for (size,) in sizes)
                self.totals.count(fp, None, False, -len(sizes), -moved)  # each tag's stay as they were
                self.totals.count(fp, None, True, len(sizes), moved)

    async def is_registered(self, fp: str, tag: str) -> bool:
        return self._known(fp, tag)

    async def purge_unknown(self, fp: str) -> int:
        def op() -> int:
            rows = self.db.execute(
                "DELETE FROM mail WHERE fp = ? AND known = 0 RETURNING tag, LENGTH(blob)", (fp,)
            ).fetchall()
            for tag, (messages, size) in _totals(rows).items():
                self.totals.count(fp, tag, False, -messages, -size)
            return len(rows)

        return await self._grouped(op)

    async def fetch(self, fp: str, tags: list[str], limit: int, since: float) -> list[Mail]:
        marks = ",".join("?" * len(tags))
        rows = self.db.execute(
            f"SELECT id, tag, blob, created FROM mail WHERE fp = ? AND tag IN ({marks}) "
            "AND created > ? ORDER BY id LIMIT ?",
            (fp, *tags, since, limit),
        ).fetchall()
        return [Mail(str(r[0]), r[1], r[2], r[3]) for r in rows]

    async def ack(self, fp: str, ids: list[str]) -> int:
        numeric = [int(i) for i in ids if i.isascii() and i.isdigit() and len(i) <= 18]
        if not numeric:
            return 0
        marks = ",".join("?" * len(numeric))

        def op() -> int:
            rows = self.db.execute(
                f"DELETE FROM mail WHERE fp = ? AND id IN ({marks}) RETURNING known, tag, LENGTH(blob)",
                (fp, *numeric),
            ).fetchall()
            for (known, tag), (messages, size) in _totals([((k, t), n) for k, t, n in rows]).items():
                self.totals.count(fp, tag, bool(known), -messages, -size)
            return len(rows)

        return await self._grouped(op)

    async def next_page(
        self, fp: str, ack: list[str], tags: list[str], limit: int, since: float
    ) -> tuple[int, list[Mail]]:
        deleted = await self.ack(fp, ack) if ack else 0
        return deleted, await self.fetch(fp, tags, limit, since)

    async def remember_nonce(self, fp: str, nonce: str, now: float, window: float) -> bool:
        def op() -> bool:
            cur = self.db.execute(
                "INSERT OR IGNORE INTO nonces (fp, nonce, seen) VALUES (?, ?, ?)", (fp, nonce, now)
            )
            return cur.rowcount == 1

        return await self._grouped(op)

    async def create_invite(
        self, fp: str, tag: str, expires: float, most_tags: int = MOST_TAGS
    ) -> None:
        def op() -> None:
            self.db.execute(
                "INSERT OR IGNORE INTO invites (tag, fp, expires) VALUES (?, ?, ?)", (tag, fp, expires)
            )
            self._register(fp, [tag], most_tags)

        await self._grouped(op)

    async def revoke_invite(self, fp: str, tag: str) -> bool:
        cur = self.db.execute("DELETE FROM invites WHERE tag = ? AND fp = ?", (tag, fp))
        return cur.rowcount > 0

    async def invite_owner(self, tag: str) -> str | None:
        row = self.db.execute("SELECT fp FROM invites WHERE tag = ?", (tag,)).fetchone()
        return str(row[0]) if row else None

    async def redeem_invite(
        self, tag: str, blob: bytes, now: float, max_messages: int, max_bytes: int
    ) -> RedeemOutcome:
        with self._transaction():
            row = self.db.execute(
                "SELECT fp, expires, used FROM invites WHERE tag = ?", (tag,)
            ).fetchone()
            if row is None:
                return RedeemOutcome.UNKNOWN
            fp, expires, used = row
            if used:
                return RedeemOutcome.USED
            if now >= expires:
                return RedeemOutcome.EXPIRED
            known = self._known(fp, tag)  # registered with the slot, unless the owner was at its most
            if not self.totals.room(fp, known, len(blob), max_messages, max_bytes):
                return RedeemOutcome.MAILBOX_FULL
            self.db.execute("UPDATE invites SET used = 1 WHERE tag = ?", (tag,))
            self._insert(fp, tag, blob, now, known)
            return RedeemOutcome.STORED

    async def put_ratchet(
        self, fp: str, card: str, fallback: str | None, one_time: list[tuple[int, str]], most: int
    ) -> int | None:
        def op() -> int | None:
            row = self.db.execute("SELECT high FROM ratchet_cards WHERE fp = ?", (fp,)).fetchone()
            high = -1 if row is None else int(row[0])
            fresh = dict((key_id, key) for key_id, key in one_time if key_id > high)
            if self._ratchet_left(fp) + len(fresh) > most:
                return None
            self.db.execute(
                "INSERT INTO ratchet_cards (fp, card, fallback, high) VALUES (?, ?, ?, ?) "
                "ON CONFLICT (fp) DO UPDATE SET card = excluded.card, "
                "fallback = COALESCE(excluded.fallback, fallback), high = excluded.high",
                (fp, card, fallback, max([high, *fresh])),
            )
            self.db.executemany("INSERT INTO ratchet_keys (fp, id, key) VALUES (?, ?, ?)",
                                [(fp, key_id, key) for key_id, key in fresh.items()])
            return self._ratchet_left(fp)

        return await self._grouped(op)

    def _ratchet_left(self, fp: str) -> int:
        return int(self.db.execute("SELECT COUNT(*) FROM ratchet_keys WHERE fp = ?", (fp,)).fetchone()[0])

    async def ratchet_card(self, fp: str) -> str | None:
        row = self.db.execute("SELECT card FROM ratchet_cards WHERE fp = ?", (fp,)).fetchone()
        return row[0] if row else None

    async def claim_ratchet(self, fp: str) -> Claimed | None:
        def op() -> Claimed | None:
            row = self.db.execute("SELECT card, fallback FROM ratchet_cards WHERE fp = ?", (fp,)).fetchone()
            if row is None:
                return None
            taken = self.db.execute(
                "DELETE FROM ratchet_keys WHERE fp = ? AND id = "
                "(SELECT MIN(id) FROM ratchet_keys WHERE fp = ?) RETURNING key", (fp, fp),
            ).fetchone()
            return Claimed(row[0], taken[0], True) if taken else Claimed(row[0], row[1], False)

        return await self._grouped(op)

    async def purge(self, now: float, ttl: float) -> int:
        with self._transaction():
            expired = self.db.execute(
                "DELETE FROM mail WHERE created <= ? RETURNING fp, known, tag, LENGTH(blob)", (now - ttl,)
            ).fetchall()
            for (fp, known, tag), (messages, size) in _totals(
                [((fp, known, tag), size) for fp, known, tag, size in expired]
            ).items():
                self.totals.count(fp, tag, bool(known), -messages, -size)
            gone = len(expired)
            self.db.execute("DELETE FROM nonces WHERE seen <= ?", (now - 600,))
            # A used slot is kept until expiry so a reused code gets "already used", not "unknown".
            self.db.execute("DELETE FROM invites WHERE expires <= ?", (now - 86400,))
        return gone

    async def stored(self) -> int:
        return self.totals.stored()

    async def ping(self) -> None:
        self.db.execute("SELECT 1").fetchone()

    async def close(self) -> None:
        if self._pending:  # answer what is queued before the connection goes
            self._commit_group()
        if self.checkpoints is not None:
            self.checkpoints.close()
        self.db.close()
        if self._lock is not None:
            os.close(self._lock)  # another relay may serve the file now
            self._lock = None


K = TypeVar("K")


def _totals(rows: list[tuple[K, int]]) -> dict[K, tuple[int, int]]:
    """(key, size) rows → per key (how many, how many bytes)."""
    totals: dict[K, tuple[int, int]] = {}
    for key, size in rows:
        count, total = totals.get(key, (0, 0))
        totals[key] = (count + 1, total + size)
    return totals
