"""A loopback HTTP proxy that forwards to a real relay and dies on cue.

It lets a test cut the relay off at an exact point of a client's conversation (say, between
two acks) without touching the client or the relay.
"""

from __future__ import annotations

import http.client
import socket
import threading
from collections.abc import Callable


def read_request(conn: socket.socket) -> bytes | None:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            return None
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value.strip())
    while len(body) < length:
        chunk = conn.recv(65536)
        if not chunk:
            return None
        body += chunk
    return head + b"\r\n\r\n" + body


class ScriptedServer:
    """A loopback TCP server that hands each accepted connection to `serve_one` (a subclass's
    script) on its own thread, until `close`."""

    scheme = "http"

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self.listener.getsockname()[1]
        self.url = f"{self.scheme}://127.0.0.1:{self.port}"
        self.connections = 0
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            self.connections += 1
            threading.Thread(target=self.serve_one, args=(conn, self.connections), daemon=True).start()

    def serve_one(self, conn: socket.socket, nth: int) -> None:
        raise NotImplementedError

    def close(self) -> None:
        self.listener.close()


class DyingProxy:
    """Forwards requests until `should_die(request_line)` says so, then closes for good."""

    def __init__(self, upstream_port: int, should_die: Callable[[str], bool]) -> None:
        self.upstream_port = upstream_port
        self.should_die = should_die
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.dead = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _serve(self) -> None:
        while not self.dead.is_set():
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._handle, args=(conn,), daemon=True).start()

    def _handle(self, conn: socket.socket) -> None:
        with conn:
            while not self.dead.is_set():
                raw = read_request(conn)
                if raw is None:
                    return
                request_line = raw.split(b"\r\n", 1)[0].decode()
                if self.should_die(request_line):
                    self.die()
                    return
                conn.sendall(self._answer(request_line, raw))

    def _answer(self, request_line: str, raw: bytes) -> bytes:
        return self._forward(raw)

    def _forward(self, raw: bytes) -> bytes:
        head, _, body = raw.partition(b"\r\n\r\n")
        lines = head.decode().split("\r\n")
        method, path, _ = lines[0].split(" ", 2)
        headers = dict(line.split(": ", 1) for line in lines[1:] if ": " in line)
        headers.pop("Host", None)
        up = http.client.HTTPConnection("127.0.0.1", self.upstream_port, timeout=10)
        try:
            up.request(method, path, body=body, headers=headers)
            resp = up.getresponse()
            payload = resp.read()
            status = f"HTTP/1.1 {resp.status} {resp.reason}\r\n"
            ctype = resp.getheader("content-type", "application/json")
        finally:
            up.close()
        return (
            f"{status}content-type: {ctype}\r\ncontent-length: {len(payload)}\r\n\r\n".encode()
            + payload
        )

    def die(self) -> None:
        self.dead.set()
        self.listener.close()


class LossyProxy(DyingProxy):
    """Forwards requests, except that those `should_lose(request_line)` picks are answered
    "201 stored" and thrown away: a relay that loses what it acknowledged."""

    def __init__(self, upstream_port: int, should_lose: Callable[[str], bool]) -> None:
        self.should_lose = should_lose
        self.lost: list[str] = []
        super().__init__(upstream_port, lambda _: False)

    def _answer(self, request_line: str, raw: bytes) -> bytes:
        if self.should_lose(request_line):
            self.lost.append(request_line)
            body = b'{"id": "0"}'
            return (b"HTTP/1.1 201 Created\r\ncontent-type: application/json\r\n"
                    b"content-length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
        return self._forward(raw)
