"""File chunks in the relay's SQLite file (`relay.file_store`), beside the mail, on its connection.

Whether a file's tag is registered is read from the mail's `known` table when a chunk comes in,
so a tag the owner registers later moves its files to the owner's quota with nothing to update.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Awaitable, Callable
from typing import Any

from relay.file_store import ChunkOutcome, FileProgress, FileQuota, Usage, first_missing, judge

Grouped = Callable[[Callable[[], Any]], Awaitable[Any]]

SCHEMA = """
CREATE TABLE IF NOT EXISTS files (
    fp TEXT NOT NULL, id TEXT NOT NULL, tag TEXT NOT NULL, bytes INTEGER NOT NULL,
    created REAL NOT NULL, PRIMARY KEY (fp, id)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS files_age ON files (created);
CREATE TABLE IF NOT EXISTS chunks (
    fp TEXT NOT NULL, file TEXT NOT NULL, idx INTEGER NOT NULL, blob BLOB NOT NULL,
    PRIMARY KEY (fp, file, idx)
);
"""
KNOWN = "EXISTS (SELECT 1 FROM known k WHERE k.fp = f.fp AND k.tag = f.tag)"


class SqliteFiles:
    def __init__(self, db: sqlite3.Connection, grouped: Grouped) -> None:
        self.db = db
        self._grouped = grouped
        db.executescript(SCHEMA)

    def _usage(self, fp: str, tag: str, known: bool) -> Usage:
        which = KNOWN if known else "NOT " + KNOWN
        row = self.db.execute(
            f"SELECT COUNT(*), COALESCE(SUM(bytes), 0), COALESCE(SUM(bytes * (tag = ?)), 0) FROM files f "
            f"WHERE fp = ? AND {which}", (tag, fp),
        ).fetchone()
        return Usage(int(row[0]), int(row[1]), int(row[2]))

    def _put(self, fp: str, tag: str, file_id: str, index: int, blob: bytes, now: float,
             quota: FileQuota) -> ChunkOutcome:
        row = self.db.execute("SELECT tag, bytes FROM files WHERE fp = ? AND id = ?",
                              (fp, file_id)).fetchone()
        if row is not None and row[0] != tag:
            return ChunkOutcome.WRONG_TAG
        if self.db.execute("SELECT 1 FROM chunks WHERE fp = ? AND file = ? AND idx = ?",
                           (fp, file_id, index)).fetchone():
            return ChunkOutcome.KEPT
        known = self.db.execute("SELECT 1 FROM known WHERE fp = ? AND tag = ?", (fp, tag)).fetchone()
        outcome = judge(quota, None if row is None else int(row[1]), len(blob), known is not None,
                        self._usage(fp, tag, known is not None))
        if outcome is not ChunkOutcome.STORED:
            return outcome
        self.db.execute("INSERT INTO chunks (fp, file, idx, blob) VALUES (?, ?, ?, ?)",
                        (fp, file_id, index, blob))
        self.db.execute(
            "INSERT INTO files (fp, id, tag, bytes, created) VALUES (?, ?, ?, ?, ?) "
            "ON CONFLICT (fp, id) DO UPDATE SET bytes = bytes + excluded.bytes",
            (fp, file_id, tag, len(blob), now),
        )
        return ChunkOutcome.STORED

    async def put_chunk(
        self, fp: str, tag: str, file_id: str, index: int, blob: bytes, now: float, quota: FileQuota
    ) -> ChunkOutcome:
        outcome: ChunkOutcome = await self._grouped(
            lambda: self._put(fp, tag, file_id, index, blob, now, quota))
        return outcome

    async def progress(self, fp: str, file_id: str) -> FileProgress:
        row = self.db.execute("SELECT bytes FROM files WHERE fp = ? AND id = ?", (fp, file_id)).fetchone()
        if row is None:
            return FileProgress(0, 0)
        indices = self.db.execute("SELECT idx FROM chunks WHERE fp = ? AND file = ?", (fp, file_id))
        return FileProgress(first_missing(i for (i,) in indices), int(row[0]))

    async def get_chunk(self, fp: str, file_id: str, index: int) -> bytes | None:
        row = self.db.execute("SELECT blob FROM chunks WHERE fp = ? AND file = ? AND idx = ?",
                              (fp, file_id, index)).fetchone()
        return None if row is None else bytes(row[0])

    def _delete(self, pairs: list[tuple[str, str]]) -> int:
        gone = 0
        for fp, file_id in pairs:
            self.db.execute("DELETE FROM chunks WHERE fp = ? AND file = ?", (fp, file_id))
            gone += self.db.execute("DELETE FROM files WHERE fp = ? AND id = ?", (fp, file_id)).rowcount
        return gone

    async def ack(self, fp: str, file_ids: list[str]) -> int:
        gone: int = await self._grouped(lambda: self._delete([(fp, i) for i in dict.fromkeys(file_ids)]))
        return gone

    async def purge_unknown(self, fp: str) -> int:
        def op() -> int:
            junk = self.db.execute(f"SELECT id FROM files f WHERE fp = ? AND NOT {KNOWN}", (fp,)).fetchall()
            return self._delete([(fp, str(i)) for (i,) in junk])

        gone: int = await self._grouped(op)
        return gone

    async def purge(self, now: float, ttl: float) -> int:
        def op() -> int:
            expired = self.db.execute("SELECT fp, id FROM files WHERE created <= ?", (now - ttl,)).fetchall()
            return self._delete([(str(fp), str(i)) for fp, i in expired])

        gone: int = await self._grouped(op)
        return gone
