"""A Unix socket standing in for Claude Code's inbox, and the spool records the tests hand to it."""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import uuid
from pathlib import Path
from typing import Any

from spool_writer.record import SpoolRecord

FP = "ab" * 16


def record(text: str, msg_id: str | None = None) -> SpoolRecord:
    return {"id": msg_id or uuid.uuid4().hex, "from": FP, "name": "alice", "text": text,
            "ts": "2026-12-02T00:00:00Z", "kind": "chat"}


class StandInInbox:
    """A Unix socket that keeps every line written to it, as Claude Code's inbox takes them."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.lines: list[dict[str, Any]] = []
        self.server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.server.bind(str(path))
        self.server.listen(8)
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            self.lines += [json.loads(line) for line in read_all(conn).splitlines()]

    def close(self) -> None:
        # shutdown wakes the accept() blocked in the thread; close alone would leave it blocked on
        # a descriptor number the next test's socket may be given.
        with contextlib.suppress(OSError):
            self.server.shutdown(socket.SHUT_RDWR)
        self.server.close()
        self.thread.join(timeout=10)


def read_all(conn: socket.socket) -> bytes:
    with conn:
        chunks = []
        while chunk := conn.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks)
