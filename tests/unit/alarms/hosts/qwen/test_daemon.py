"""The Qwen door's write to a session's socket: what counts as the frame not reaching Qwen."""

from __future__ import annotations

import socket
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from alarms.hosts.qwen.daemon import SendFailed, send


@pytest.fixture
def short_dir() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="qd-") as folder:  # not tmp_path: a socket path is short
        yield Path(folder)


def test_a_frame_written_whole_to_a_qwen_too_busy_to_close_is_sent_not_failed(short_dir: Path) -> None:
    path = str(short_dir / "s.sock")
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path)
    server.listen(1)
    got: list[bytes] = []
    release = threading.Event()

    def busy_qwen() -> None:
        conn, _ = server.accept()
        release.wait(5)  # reads only after the sender gave up waiting for its close
        got.append(conn.recv(1 << 20))
        conn.close()

    reader = threading.Thread(target=busy_qwen)
    reader.start()
    try:
        send(path, b"frame\n", timeout=0.2)
    finally:
        release.set()
        reader.join(5)
        server.close()
    assert got == [b"frame\n"], "the frame was in the socket after the sender closed"


def test_a_socket_nobody_listens_on_is_a_failure(short_dir: Path) -> None:
    with pytest.raises(SendFailed, match="gone"):
        send(str(short_dir / "none.sock"), b"frame\n", timeout=0.2)
