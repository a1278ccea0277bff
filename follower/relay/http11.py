"""Just enough HTTP/1.1 for the relay client over plain TCP: one kept-alive connection.

The standard library's http.client drags in the email package (~20 ms of import on every
`talk send`). h11 would parse for us, but importing it costs 10-17 ms on every `talk send` and
`talk receive` as well, for answers that are small JSON bodies with a Content-Length (or
chunked, behind some proxies): a socket and a few lines of parsing do. HTTPS relays use
http.client, whose TLS handling is not worth rewriting.

The relay is not trusted to speak well. Each limit below is a security feature: it keeps a
hostile relay from filling memory or holding a command.

    MAX_LINE         bytes of a status line, a header or trailer field, or a chunk-size line;
                     the relay's are < 200 bytes
    MAX_FIELDS       header fields in one answer, and trailer fields after a chunked body;
                     the relay sends < 10
    MAX_INTERIM      1xx answers before the real one (the relay sends none)
    MAX_SIZE_DIGITS  digits of a content-length or a chunk size: more is over any body limit
    max_body         body bytes, declared or received: the caller's largest legitimate answer
    total_s          seconds for one whole answer, so a relay that drips bytes is cut off

Anything outside those bounds or outside HTTP/1.1 is a `ProtocolError`, never a Python error
from inside the parser, and the connection is not used again; so is a connection closed after
the answer's first byte. One case is not: a connection closed before the answer's first byte is
a ConnectionResetError, the sign of a kept-alive connection the relay had already closed, which
the caller may retry on a new one. A connection with bytes after a complete answer is dropped
too: they would otherwise be read as the answer to the next request.
"""

from __future__ import annotations

# The C module under `socket`: socket.py and the selectors module it loads cost about 2 ms of
# every command's start, for a connection this client opens and reads in a few calls.
import _socket
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable

MAX_LINE = 8 * 1024
MAX_FIELDS = 100
MAX_INTERIM = 5
MAX_SIZE_DIGITS = 12
DEFAULT_MAX_BODY = 1 << 20
RECV_BYTES = 64 * 1024  # one read: large enough that a big answer is few system calls
_HEX = frozenset("0123456789abcdefABCDEF")
_NO_BODY = frozenset({204, 304})
_FRAMING = ("content-length", "transfer-encoding")


class ProtocolError(OSError):
    """The peer broke HTTP/1.1 framing or one of this module's limits."""


def _lookup_name(host: str) -> bytes:
    """`host` as getaddrinfo takes it. Given a str, getaddrinfo encodes it with the idna codec,
    whose first use imports about 3 ms of modules into every command; an ASCII name's bytes are
    the same lookup."""
    return host.encode("ascii") if host.isascii() else host.encode("idna")


def _host_field(host: str, port: int) -> str:
    """The Host field: a name in its ASCII (IDNA) form, as a request line carries only ASCII."""
    return f"{_lookup_name(host).decode('ascii')}:{port}"


def _connect(host: bytes, port: int, timeout: float) -> _socket.socket:
    """A TCP connection to the first of `host`'s addresses that answers, as
    socket.create_connection makes it; Nagle off, so a request leaves in one go."""
    failure: OSError | None = None
    for family, kind, proto, _, address in _socket.getaddrinfo(host, port, 0, _socket.SOCK_STREAM):
        sock = _socket.socket(family, kind, proto)
        try:
            sock.settimeout(timeout)
            sock.setsockopt(_socket.IPPROTO_TCP, _socket.TCP_NODELAY, 1)
            sock.connect(address)
        except OSError as exc:
            sock.close()
            failure = exc
            continue
        return sock
    raise failure or OSError(f"no address found for {host.decode('ascii', 'replace')}")


class Connection:
    """`timeout` bounds each wait for bytes; `total_s` bounds one whole answer, so a relay that
    drips a byte at a time cannot hold a command forever; `max_body` bounds what is buffered."""

    def __init__(self, host: str, port: int, timeout: float, *, total_s: float | None = None,
                 max_body: int = DEFAULT_MAX_BODY) -> None:
        self.host, self.port, self.timeout = host, port, timeout
        self.total_s = 3 * timeout if total_s is None else total_s
        self.max_body = max_body
        self._sock: _socket.socket | None = None
        # A bytearray grows in place and drops consumed bytes from its front without copying the
        # rest, so a large answer is read in linear time.
        self._buf = bytearray()
        self._deadline = 0.0
        self._received = 0  # bytes of the current answer so far

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None
        self._buf.clear()

    def exchange(
        self, method: str, path: str, body: bytes, headers: dict[str, str],
        meanwhile: Callable[[], None] | None = None,
    ) -> tuple[int, bytes]:
        """Send one request and read its answer; `meanwhile` runs once the request has left, while
        the other end works on it, before the answer is read.

        Raises:
            ProtocolError: the answer is malformed, cut short, or over a limit.
            TimeoutError: no answer within `total_s` (or no byte within `timeout`).
            OSError: the connection failed (ConnectionResetError if the peer closed it before
                answering: a kept-alive connection it had dropped).
        """
        sock = self._open()
        self._deadline = time.monotonic() + self.total_s
        self._received = 0
        try:
            sock.settimeout(self.timeout)
            sock.sendall(self._request(method, path, body, headers))
            if meanwhile is not None:
                meanwhile()
            status, fields = self._read_head()
            payload = self._read_body(status, fields, method)
        except BaseException:
            self.close()  # the stream's framing is lost; never reuse it
            raise
        if fields.get("connection", "").lower() == "close" or self._buf:
            self.close()
        return status, payload

    def _open(self) -> _socket.socket:
        if self._sock is not None and self._unsolicited(self._sock):
            self.close()
        if self._sock is None:
            self._sock = _connect(_lookup_name(self.host), self.port, self.timeout)
        return self._sock

    @staticmethod
    def _unsolicited(sock: _socket.socket) -> bool:
        """Whether bytes came after the last answer, before any request asked for them: read
        as the next answer, they would let the relay (or anyone on the path) forge it. A closed
        connection is not counted: the request's failure on it is what the caller retries."""
        sock.settimeout(0.0)
        try:
            return bool(sock.recv(1, _socket.MSG_PEEK))
        except OSError:  # nothing waiting (BlockingIOError), or a failure the request reports
            return False

    def _request(self, method: str, path: str, body: bytes, headers: dict[str, str]) -> bytes:
        lines = [f"{method} {path} HTTP/1.1", f"host: {_host_field(self.host, self.port)}",
                 f"content-length: {len(body)}"]
        lines += [f"{k}: {v}" for k, v in headers.items()]
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body

    def _fill(self) -> None:
        assert self._sock is not None
        left = self._deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError(f"the answer took longer than {self.total_s:g} s")
        self._sock.settimeout(min(self.timeout, left))
        chunk = self._sock.recv(RECV_BYTES)
        if not chunk:
            if self._received:
                raise ProtocolError(f"the relay closed the connection {self._received} bytes into its answer")
            raise ConnectionResetError("the relay closed the connection")
        self._received += len(chunk)
        self._buf += chunk

    def _read_line(self) -> str:
        """One line without its CRLF (a bare LF is taken too), at most MAX_LINE bytes."""
        while (end := self._buf.find(b"\n", 0, MAX_LINE + 2)) < 0:
            if len(self._buf) > MAX_LINE:
                raise ProtocolError(f"a line of the answer is longer than {MAX_LINE} bytes")
            self._fill()
        line = self._take(end + 1)[:-1]
        return line.removesuffix(b"\r").decode("latin-1")

    def _take(self, size: int) -> bytes:
        """The first `size` bytes of the buffer, taken out of it; waits for them to arrive."""
        while len(self._buf) < size:
            self._fill()
        with memoryview(self._buf) as view:
            data = bytes(view[:size])  # one copy, not a bytearray slice copied again
        del self._buf[:size]
        return data

    def _read_fields(self, kind: str) -> dict[str, str]:
        """Header (or trailer) fields up to the empty line; names lower-cased."""
        fields: dict[str, str] = {}
        for _ in range(MAX_FIELDS + 1):
            line = self._read_line()
            if not line:
                return fields
            name, colon, value = line.partition(":")
            name = name.lower()
            # A space or tab before the colon, or a line starting with one (an obsolete folded
            # value), is how one field is smuggled past a parser that reads it as another.
            if not colon or not name or name != name.strip() or " " in name or "\t" in name:
                raise ProtocolError(f"a malformed {kind} field: {line[:60]!r}")
            value = value.strip(" \t")
            if "\r" in value or "\0" in value:
                raise ProtocolError(f"a {kind} field with a control character: {name[:40]!r}")
            if name in _FRAMING and fields.get(name, value) != value:
                raise ProtocolError(f"two different {name} fields")
            fields[name] = value
        raise ProtocolError(f"more than {MAX_FIELDS} {kind} fields")

    def _read_head(self) -> tuple[int, dict[str, str]]:
        """The status and fields of the answer, after at most MAX_INTERIM 1xx answers."""
        for _ in range(MAX_INTERIM + 1):
            status_line = self._read_line()
            parts = status_line.split(" ", 2)
            if (len(parts) < 2 or parts[0] not in ("HTTP/1.1", "HTTP/1.0")
                    or len(parts[1]) != 3 or not parts[1].isascii() or not parts[1].isdigit()):
                raise ProtocolError(f"not an HTTP response: {status_line[:60]!r}")
            status, fields = int(parts[1]), self._read_fields("header")
            if parts[0] == "HTTP/1.0":
                fields["connection"] = "close"  # 1.0 keeps a connection only when asked to
            if status == 101:
                raise ProtocolError("the relay switched protocols")
            if status >= 200:
                return status, fields
        raise ProtocolError(f"more than {MAX_INTERIM} interim (1xx) answers")

    def _read_body(self, status: int, fields: dict[str, str], method: str) -> bytes:
        if method == "HEAD" or status in _NO_BODY:
            return b""
        coding = fields.get("transfer-encoding")
        if coding is not None:
            if "content-length" in fields:  # a classic request-smuggling shape: trust neither
                raise ProtocolError("an answer with both a content-length and a transfer-encoding")
            if coding.lower() != "chunked":
                raise ProtocolError(f"an unsupported transfer-encoding {coding[:40]!r}")
            return self._read_chunked()
        length = fields.get("content-length")
        if length is None:  # read until the connection closes: the relay always gives a length
            raise ProtocolError("an answer without a content-length or a chunked body")
        size = self._size(length, "content-length", 10)
        if size > self.max_body:
            raise ProtocolError(f"an answer of {size} bytes, over the limit of {self.max_body}")
        return self._take(size)

    @staticmethod
    def _size(text: str, what: str, base: int) -> int:
        digits = "0123456789" if base == 10 else _HEX
        if not text or len(text) > MAX_SIZE_DIGITS or not all(c in digits for c in text):
            raise ProtocolError(f"a malformed {what}: {text[:20]!r}")
        return int(text, base)

    def _read_chunked(self) -> bytes:
        parts: list[bytes] = []
        total = 0
        while True:
            size = self._size(self._read_line().split(";", 1)[0].strip(" \t"), "chunk size", 16)
            total += size
            if total > self.max_body:
                raise ProtocolError(f"a chunked answer over the limit of {self.max_body} bytes")
            if size == 0:
                self._read_fields("trailer")  # bounded like headers, then dropped
                return b"".join(parts)
            parts.append(self._take(size))
            if self._take(2) != b"\r\n":
                raise ProtocolError("a chunk not followed by CRLF")
