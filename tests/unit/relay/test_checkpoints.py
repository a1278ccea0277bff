"""The SQLite relay's WAL checkpoints run on their own thread, not inside a commit on the loop."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path
from typing import Any

from relay.checkpoints import BACKSTOP_PAGES, EVERY_COMMITS
from relay.sqlite_store import SqliteStore
from tests.conftest import wait_for
from tests.unit.relay.conftest import Run

FP, TAG = "a" * 64, "b" * 64
BLOB = b"\x00" * 3000  # a page of its own and more: each deposit adds several pages to the log


def checkpoint_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "checkpoints"]


def deposit(store: SqliteStore, run: Run[Any], count: int) -> list[str]:
    ids = []
    for _ in range(count):  # one at a time: one commit each
        ids.append(run(store.deposit(FP, TAG, BLOB, 1.0, 10_000, 10**9)).id)
    return ids


def test_the_log_is_copied_back_by_the_thread_long_before_the_backstop(tmp_path: Path, run: Run[Any]) -> None:
    path = tmp_path / "relay.db"
    store = SqliteStore(path)
    try:
        assert store.db.execute("PRAGMA wal_autocheckpoint").fetchone()[0] == BACKSTOP_PAGES
        before = path.stat().st_size
        deposit(store, run, EVERY_COMMITS - 1)
        assert checkpoint_threads() == []  # none until one is due: an idle relay has no thread
        ids = deposit(store, run, 1)
        assert store.checkpoints is not None
        wait_for(lambda: store.checkpoints is not None and store.checkpoints.done >= 1, 30, "a checkpoint")
        # Far below the connection's own threshold: only the thread copied the log back.
        assert path.stat().st_size > before + (EVERY_COMMITS - 1) * len(BLOB)
    finally:
        run(store.close())
    assert checkpoint_threads() == []  # close stops it
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT COUNT(*) FROM mail").fetchone()[0] == EVERY_COMMITS
        assert db.execute("SELECT MAX(id) FROM mail").fetchone()[0] == int(ids[0])


def test_a_store_in_memory_has_no_checkpoints(run: Run[Any]) -> None:
    store = SqliteStore(":memory:")
    try:
        assert store.checkpoints is None
        deposit(store, run, EVERY_COMMITS * 2)
        assert checkpoint_threads() == []
    finally:
        run(store.close())
