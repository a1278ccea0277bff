"""The minimal HTTP/1.1 client against a scripted loopback server: framing edge cases."""

from __future__ import annotations

import socket
import threading

import pytest

from follower.http11 import Connection, ProtocolError


def serve(replies: list[bytes]) -> tuple[int, list[bytes]]:
    """Accept one connection and answer each request with the next scripted reply."""
    listener = socket.create_server(("127.0.0.1", 0))
    requests: list[bytes] = []

    def run() -> None:
        conn, _ = listener.accept()
        listener.close()
        with conn:
            for reply in replies:
                data = b""
                while b"\r\n\r\n" not in data:
                    data += conn.recv(4096)
                requests.append(data)
                conn.sendall(reply)

    threading.Thread(target=run, daemon=True).start()
    return listener.getsockname()[1], requests


def test_content_length_replies_reuse_one_connection() -> None:
    port, requests = serve([
        b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n{}",
        b"HTTP/1.1 404 Not Found\r\nContent-Length: 5\r\n\r\nnope!",
    ])
    conn = Connection("127.0.0.1", port, timeout=5)
    assert conn.exchange("GET", "/a", b"", {}) == (200, b"{}")
    assert conn.exchange("POST", "/b", b"xyz", {"x-k": "v"}) == (404, b"nope!")
    assert requests[1].startswith(b"POST /b HTTP/1.1\r\n")
    assert b"content-length: 3" in requests[1] and b"x-k: v" in requests[1]
    conn.close()


def test_chunked_reply_is_reassembled() -> None:
    body = b"4\r\nwiki\r\n5;ext=1\r\npedia\r\n0\r\n\r\n"
    port, _ = serve([b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n" + body])
    conn = Connection("127.0.0.1", port, timeout=5)
    assert conn.exchange("GET", "/", b"", {}) == (200, b"wikipedia")
    conn.close()


def test_garbage_and_missing_length_are_protocol_errors() -> None:
    port, _ = serve([b"SSH-2.0-OpenSSH\r\n\r\n"])
    with pytest.raises(ProtocolError):
        Connection("127.0.0.1", port, timeout=5).exchange("GET", "/", b"", {})
    port, _ = serve([b"HTTP/1.1 200 OK\r\n\r\nbody"])
    with pytest.raises(ProtocolError):
        Connection("127.0.0.1", port, timeout=5).exchange("GET", "/", b"", {})


def test_peer_closing_midway_is_a_connection_reset() -> None:
    port, _ = serve([b"HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\nshort"])
    conn = Connection("127.0.0.1", port, timeout=5)
    with pytest.raises(ConnectionResetError):
        conn.exchange("GET", "/", b"", {})
