"""WAL checkpoints of the relay's SQLite file, on a thread of their own.

SQLite copies its write-ahead log back into the database file (a checkpoint) once the log
holds 1,000 pages, inside whichever commit crosses that line: on the event loop, with an
fsync of the database file. That commit, and every request waiting behind it, took 3 to 4 ms
instead of a tenth of one, about once per hundred messages: the slowest percent of live
mail. Here the store's connection checkpoints only as a backstop (`BACKSTOP_PAGES`), and a
thread with its own connection runs a passive checkpoint (it never blocks a writer) every
`EVERY_COMMITS` commits; SQLite runs it without holding the interpreter, so the loop goes on.

What a crash or a power cut may lose is unchanged: a commit is in the log either way, and the
log is synced by the checkpoint, wherever that runs.
"""

from __future__ import annotations

import logging
import sqlite3
import threading

__all__ = ["BACKSTOP_PAGES", "EVERY_COMMITS", "Checkpointer"]

EVERY_COMMITS = 64  # a deposit's commit writes ~5 pages: a few hundred pages per checkpoint
BACKSTOP_PAGES = 10_000  # the store's connection checkpoints itself only past this (40 MB of log)
log = logging.getLogger("talk.relay")


class Checkpointer:
    """Told of each commit (`committed`, on the event loop); checkpoints `path` on its thread,
    started on first need (an idle relay keeps no thread)."""

    def __init__(self, path: str, every: int = EVERY_COMMITS) -> None:
        self.path = path
        self.every = every
        self.done = 0  # checkpoints run (for tests and the curious)
        self._commits = 0
        self._due = threading.Event()
        self._stopping = False
        self._thread: threading.Thread | None = None

    def committed(self) -> None:
        self._commits += 1
        if self._commits < self.every:
            return
        self._commits = 0
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="checkpoints", daemon=True)
            self._thread.start()
        self._due.set()

    def close(self) -> None:
        """Stop the thread, after the checkpoint it is running; the store's own close then
        checkpoints what is left."""
        if self._thread is None:
            return
        self._stopping = True
        self._due.set()
        self._thread.join()
        self._thread = None

    def _run(self) -> None:
        db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        try:
            while True:
                self._due.wait()
                self._due.clear()
                if self._stopping:
                    return
                try:
                    db.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
                    self.done += 1
                except sqlite3.Error as exc:  # the backstop checkpoints instead; try again later
                    log.warning("relay: WAL checkpoint failed (%s); the store will checkpoint itself", exc)
        finally:
            db.close()
