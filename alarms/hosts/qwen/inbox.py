"""The Qwen door's own inbox socket, where Qwen Code sends its delivery-status answers.

Qwen answers a user frame on a separate connection to the frame's `from` path, presenting the
frame's `replyToken` on the first line. The socket lives in a fresh 0700 folder and the token
is minted per process, so only a process that read one of our frames can present it; even so
each line is parsed as hostile (`qwen_frames.parse_receipt`), a connection that does not start
with the token is closed unread, and no connection may hold more than `MAX_BYTES` or last
longer than `DEADLINE_S`.

No registry record is written for it: receipts need only `from`, and a record would make the
door a peer every Qwen session lists and its model can write to.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import socket
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

from alarms.hosts.qwen.frames import MAX_LINE_BYTES, QwenReceipt, parse_auth, parse_receipt
from durable.digests import compare_digest

MAX_BYTES = 2 * MAX_LINE_BYTES
DEADLINE_S = 5.0
MAX_CONNECTIONS = 16
MAX_PATH_BYTES = 100


def _folder() -> Path:
    """A fresh private folder for the socket, under XDG_RUNTIME_DIR when usable, else the temp folder."""
    for base in (os.environ.get("XDG_RUNTIME_DIR"), tempfile.gettempdir(), "/tmp"):
        if not base or not os.path.isdir(base):
            continue
        candidate = os.path.join(base, "talk-qwen-" + secrets.token_hex(8), "inbox.sock")
        if len(os.fsencode(candidate)) <= MAX_PATH_BYTES:
            return Path(tempfile.mkdtemp(prefix="talk-qwen-", dir=base))
    raise OSError("no folder short enough for a socket; set TMPDIR to a short path")


def lines_of(data: bytes) -> list[bytes]:
    return [line for line in data.split(b"\n") if line.strip()]


def receipts_of(data: bytes, token: str) -> list[QwenReceipt]:
    """The receipts a connection carried: none unless its first line presents `token`."""
    lines = lines_of(data)
    if not lines:
        return []
    presented = parse_auth(lines[0])
    if presented is None or not compare_digest(presented.encode(), token.encode()):
        return []
    return [r for r in map(parse_receipt, lines[1:]) if r is not None]


class ReceiptInbox:
    """Binds at once; `start()` serves in a daemon thread, calling `on_receipt` for each answer."""

    def __init__(self, on_receipt: Callable[[QwenReceipt], None]) -> None:
        self.on_receipt = on_receipt
        self.token = secrets.token_hex(32)
        self.folder = _folder()
        self.path = str(self.folder / "inbox.sock")
        self.server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.server.bind(self.path)
        os.chmod(self.path, 0o600)
        self.server.listen(MAX_CONNECTIONS)
        self.slots = threading.BoundedSemaphore(MAX_CONNECTIONS)
        self.closed = False

    def start(self) -> ReceiptInbox:
        threading.Thread(target=self._serve, name="qwen-receipts", daemon=True).start()
        return self

    def _serve(self) -> None:
        while not self.closed:
            try:
                conn, _ = self.server.accept()
            except OSError:
                if self.closed:
                    return
                time.sleep(0.05)
                continue
            if not self.slots.acquire(blocking=False):
                conn.close()  # too many at once: Qwen's receipts are best-effort, a lost one is retried
                continue
            threading.Thread(target=self._handle, args=(conn,), daemon=True).start()

    def _handle(self, conn: socket.socket) -> None:
        try:
            data = self._read(conn)
            for receipt in receipts_of(data, self.token):
                self.on_receipt(receipt)
        finally:
            conn.close()
            self.slots.release()

    @staticmethod
    def _read(conn: socket.socket) -> bytes:
        deadline = time.monotonic() + DEADLINE_S
        chunks: list[bytes] = []
        size = 0
        with contextlib.suppress(OSError):
            while size <= MAX_BYTES:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                conn.settimeout(left)
                chunk = conn.recv(65536)
                if not chunk:
                    break
                chunks.append(chunk)
                size += len(chunk)
        return b"".join(chunks)[:MAX_BYTES]

    def close(self) -> None:
        self.closed = True
        with contextlib.suppress(OSError):
            self.server.close()
        with contextlib.suppress(OSError):
            os.unlink(self.path)
        with contextlib.suppress(OSError):
            os.rmdir(self.folder)
