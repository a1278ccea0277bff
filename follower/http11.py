"""Just enough HTTP/1.1 for the relay client over plain TCP: one kept-alive connection.

The standard library's http.client drags in the email package (~20 ms of import on every
`talk send`); the relay's answers are small JSON bodies with a Content-Length (or chunked,
behind some proxies), so a socket and a few lines of parsing do. HTTPS relays use
http.client, whose TLS handling is not worth rewriting.
"""

from __future__ import annotations

import socket


class ProtocolError(OSError):
    """The peer broke HTTP/1.1 framing."""


class Connection:
    def __init__(self, host: str, port: int, timeout: float) -> None:
        self.host, self.port, self.timeout = host, port, timeout
        self._sock: socket.socket | None = None
        self._buf = b""

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None
        self._buf = b""

    def exchange(
        self, method: str, path: str, body: bytes, headers: dict[str, str]
    ) -> tuple[int, bytes]:
        if self._sock is None:
            self._sock = socket.create_connection((self.host, self.port), self.timeout)
            self._sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        lines = [f"{method} {path} HTTP/1.1", f"host: {self.host}:{self.port}",
                 f"content-length: {len(body)}"]
        lines += [f"{k}: {v}" for k, v in headers.items()]
        try:
            self._sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body)
            status, fields = self._read_head()
            payload = self._read_body(fields, method)
        except BaseException:
            self.close()  # the stream's framing is lost; never reuse it
            raise
        if fields.get("connection", "").lower() == "close":
            self.close()
        return status, payload

    def _fill(self) -> None:
        assert self._sock is not None
        chunk = self._sock.recv(65536)
        if not chunk:
            raise ConnectionResetError("the relay closed the connection")
        self._buf += chunk

    def _read_until(self, marker: bytes) -> bytes:
        while marker not in self._buf:
            if len(self._buf) > 1 << 20:
                raise ProtocolError("response head too large")
            self._fill()
        head, _, self._buf = self._buf.partition(marker)
        return head

    def _read_exactly(self, size: int) -> bytes:
        while len(self._buf) < size:
            self._fill()
        data, self._buf = self._buf[:size], self._buf[size:]
        return data

    def _read_head(self) -> tuple[int, dict[str, str]]:
        head = self._read_until(b"\r\n\r\n").decode("latin-1").split("\r\n")
        parts = head[0].split(" ", 2)
        if len(parts) < 2 or not parts[0].startswith("HTTP/1.") or not parts[1].isdigit():
            raise ProtocolError(f"not an HTTP response: {head[0][:60]!r}")
        fields = {}
        for line in head[1:]:
            name, _, value = line.partition(":")
            fields[name.strip().lower()] = value.strip()
        return int(parts[1]), fields

    def _read_body(self, fields: dict[str, str], method: str) -> bytes:
        if method == "HEAD":
            return b""
        if fields.get("transfer-encoding", "").lower() == "chunked":
            return self._read_chunked()
        length = fields.get("content-length")
        if length is None or not length.isdigit():
            raise ProtocolError("response without a usable content-length")
        return self._read_exactly(int(length))

    def _read_chunked(self) -> bytes:
        parts: list[bytes] = []
        while True:
            size = int(self._read_until(b"\r\n").split(b";")[0], 16)
            if size == 0:
                self._read_until(b"\r\n")  # no trailers are expected from the relay
                return b"".join(parts)
            parts.append(self._read_exactly(size))
            self._read_exactly(2)
