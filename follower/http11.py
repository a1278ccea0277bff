"""Just enough HTTP/1.1 for the relay client over plain TCP: one kept-alive connection.

The standard library's http.client drags in the email package (~20 ms of import on every
`talk send`); the relay's answers are small JSON bodies with a Content-Length (or chunked,
behind some proxies), so a socket and a few lines of parsing do. HTTPS relays use
http.client, whose TLS handling is not worth rewriting.

The relay is not trusted to speak well: every line, the number of header fields, the body
and the whole answer's time are bounded, and anything outside those bounds or outside the
grammar is a `ProtocolError`, never a Python error from deep inside the parser.
"""

from __future__ import annotations

import socket
import time

MAX_LINE = 8 * 1024  # a status line, header field or chunk-size line; the relay's are < 200 bytes
MAX_FIELDS = 100  # header fields (and chunked trailers) in one answer; the relay sends < 10
DEFAULT_MAX_BODY = 1 << 20
_HEX = frozenset("0123456789abcdefABCDEF")


class ProtocolError(OSError):
    """The peer broke HTTP/1.1 framing or one of this module's limits."""


def _lookup_name(host: str) -> bytes:
    """`host` as getaddrinfo takes it. Given a str, getaddrinfo encodes it with the idna codec,
    whose first use imports about 3 ms of modules into every command; an ASCII name's bytes are
    the same lookup."""
    return host.encode("ascii") if host.isascii() else host.encode("idna")


class Connection:
    """`timeout` bounds each wait for bytes; `total_s` bounds one whole answer, so a relay that
    drips a byte at a time cannot hold a command forever; `max_body` bounds what is buffered."""

    def __init__(self, host: str, port: int, timeout: float, *, total_s: float | None = None,
                 max_body: int = DEFAULT_MAX_BODY) -> None:
        self.host, self.port, self.timeout = host, port, timeout
        self.total_s = 3 * timeout if total_s is None else total_s
        self.max_body = max_body
        self._sock: socket.socket | None = None
        self._buf = b""
        self._deadline = 0.0

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None
        self._buf = b""

    def exchange(
        self, method: str, path: str, body: bytes, headers: dict[str, str]
    ) -> tuple[int, bytes]:
        """Send one request and read its answer.

        Raises:
            ProtocolError: the answer is malformed or over a limit.
            TimeoutError: no answer within `total_s` (or no byte within `timeout`).
            OSError: the connection failed (ConnectionResetError if the peer closed it).
        """
        if self._sock is None:
            self._sock = socket.create_connection((_lookup_name(self.host), self.port),  # type: ignore[arg-type]
                                                  self.timeout)
            self._sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._deadline = time.monotonic() + self.total_s
        lines = [f"{method} {path} HTTP/1.1", f"host: {self.host}:{self.port}",
                 f"content-length: {len(body)}"]
        lines += [f"{k}: {v}" for k, v in headers.items()]
        try:
            self._sock.settimeout(self.timeout)
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
        left = self._deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError(f"the answer took longer than {self.total_s:g} s")
        self._sock.settimeout(min(self.timeout, left))
        chunk = self._sock.recv(65536)
        if not chunk:
            raise ConnectionResetError("the relay closed the connection")
        self._buf += chunk

    def _read_line(self) -> str:
        """One line without its CRLF (a bare LF is taken too), at most MAX_LINE bytes."""
        while (end := self._buf.find(b"\n", 0, MAX_LINE + 2)) < 0:
            if len(self._buf) > MAX_LINE:
                raise ProtocolError(f"a line of the answer is longer than {MAX_LINE} bytes")
            self._fill()
        line, self._buf = self._buf[:end], self._buf[end + 1:]
        return line.removesuffix(b"\r").decode("latin-1")

    def _read_exactly(self, size: int) -> bytes:
        while len(self._buf) < size:
            self._fill()
        data, self._buf = self._buf[:size], self._buf[size:]
        return data

    def _read_fields(self) -> dict[str, str]:
        """Header fields up to the empty line; names lower-cased."""
        fields: dict[str, str] = {}
        for _ in range(MAX_FIELDS + 1):
            line = self._read_line()
            if not line:
                return fields
            name, colon, value = line.partition(":")
            name = name.lower()
            if not colon or not name or name != name.strip() or " " in name:
                raise ProtocolError(f"a malformed header field: {line[:60]!r}")
            value = value.strip()
            if fields.get(name, value) != value and name in ("content-length", "transfer-encoding"):
                raise ProtocolError(f"two different {name} fields")
            fields[name] = value
        raise ProtocolError(f"more than {MAX_FIELDS} header fields")

    def _read_head(self) -> tuple[int, dict[str, str]]:
        status_line = self._read_line()
        parts = status_line.split(" ", 2)
        if (len(parts) < 2 or parts[0] not in ("HTTP/1.1", "HTTP/1.0")
                or len(parts[1]) != 3 or not parts[1].isascii() or not parts[1].isdigit()):
            raise ProtocolError(f"not an HTTP response: {status_line[:60]!r}")
        return int(parts[1]), self._read_fields()

    def _read_body(self, fields: dict[str, str], method: str) -> bytes:
        if method == "HEAD":
            return b""
        coding = fields.get("transfer-encoding", "").lower()
        if coding == "chunked":
            return self._read_chunked()
        if coding:
            raise ProtocolError(f"an unsupported transfer-encoding {coding[:40]!r}")
        length = fields.get("content-length")
        if length is None or not length.isascii() or not length.isdigit():
            raise ProtocolError("an answer without a usable content-length")
        if len(length) > 12 or int(length) > self.max_body:
            raise ProtocolError(f"an answer of {length[:20]} bytes, over the limit of {self.max_body}")
        return self._read_exactly(int(length))

    def _read_chunked(self) -> bytes:
        parts: list[bytes] = []
        total = 0
        while True:
            digits = self._read_line().split(";", 1)[0].strip()
            if not digits or len(digits) > 12 or not _HEX.issuperset(digits):
                raise ProtocolError(f"a malformed chunk size: {digits[:20]!r}")
            size = int(digits, 16)
            total += size
            if total > self.max_body:
                raise ProtocolError(f"a chunked answer over the limit of {self.max_body} bytes")
            if size == 0:
                self._read_fields()  # trailers: bounded like headers, then dropped
                return b"".join(parts)
            parts.append(self._read_exactly(size))
            if self._read_exactly(2) != b"\r\n":
                raise ProtocolError("a chunk not followed by CRLF")
