"""HTTP/1.1 for the relay client over plain TCP: one kept-alive connection, parsed by h11.

The standard library's http.client drags in the email package (~20 ms of import on every
`talk send`). h11 parses HTTP without doing any I/O, so this module keeps the socket (connect,
keep-alive, timeouts) and hands h11 the bytes it reads. HTTPS relays use http.client, whose
TLS handling is not worth rewriting.

The relay is not trusted to speak well. Each limit below keeps a hostile relay from filling
memory or holding a command:

    MAX_HEAD     bytes of one head (status line and fields, or the trailers): h11's
                 max_incomplete_event_size; the relay's heads are < 300 bytes
    MAX_FIELDS   header fields in one answer, and trailer fields (h11 counts none)
    MAX_INTERIM  1xx answers before the real one (the relay sends none)
    max_body     body bytes, declared or received: the caller's largest legitimate answer
    total_s      seconds for one whole answer, so a relay that drips bytes is cut off

Anything outside those bounds or outside HTTP/1.1 is a `ProtocolError`, never a Python error
from inside the parser, and the connection is not used again. One case is not: a connection
closed before the answer's first byte is a ConnectionResetError, the sign of a kept-alive
connection the relay had already closed, which the caller may retry on a new one.
"""

from __future__ import annotations

import socket
import time

import h11

MAX_HEAD = 16 * 1024
MAX_FIELDS = 100
MAX_INTERIM = 5
DEFAULT_MAX_BODY = 1 << 20
_NO_BODY = frozenset({204, 304})


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
        self._http: h11.Connection | None = None
        self._deadline = 0.0
        self._received = 0  # bytes of the current answer so far

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None
        self._http = None

    def exchange(
        self, method: str, path: str, body: bytes, headers: dict[str, str]
    ) -> tuple[int, bytes]:
        """Send one request and read its answer.

        Raises:
            ProtocolError: the answer is malformed, cut short, or over a limit.
            TimeoutError: no answer within `total_s` (or no byte within `timeout`).
            OSError: the connection failed (ConnectionResetError if the peer closed it before
                answering: a kept-alive connection it had dropped).
        """
        sock, http = self._open()
        self._deadline = time.monotonic() + self.total_s
        self._received = 0
        try:
            sock.settimeout(self.timeout)
            sock.sendall(self._request(http, method, path, body, headers))
            status, payload = self._read_answer(http, method)
        except BaseException:
            self.close()  # the stream's framing is lost; never reuse it
            raise
        self._finish(http)
        return status, payload

    def _open(self) -> tuple[socket.socket, h11.Connection]:
        if self._sock is None or self._http is None:
            self.close()
            sock = socket.create_connection((_lookup_name(self.host), self.port),  # type: ignore[arg-type]
                                            self.timeout)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self._sock = sock
            self._http = h11.Connection(h11.CLIENT, max_incomplete_event_size=MAX_HEAD)
        return self._sock, self._http

    def _request(self, http: h11.Connection, method: str, path: str, body: bytes,
                 headers: dict[str, str]) -> bytes:
        host = _lookup_name(self.host).decode("ascii")  # h11 takes ASCII fields only
        fields = [("host", f"{host}:{self.port}"), ("content-length", str(len(body))),
                  *headers.items()]
        events: list[h11.Event] = [h11.Request(method=method, target=path, headers=fields)]
        if body:
            events.append(h11.Data(data=body))
        events.append(h11.EndOfMessage())
        return b"".join(http.send(event) or b"" for event in events)

    def _finish(self, http: h11.Connection) -> None:
        """Keep the connection for the next request only if both sides may go on and nothing
        came after the answer: extra bytes would be read as the next request's answer."""
        if http.our_state is h11.DONE and http.their_state is h11.DONE and not http.trailing_data[0]:
            http.start_next_cycle()
        else:
            self.close()

    def _read_answer(self, http: h11.Connection, method: str) -> tuple[int, bytes]:
        response = self._read_head(http, method)
        parts: list[bytes] = []
        size = 0
        while True:
            event = self._next_event(http)
            if isinstance(event, h11.Data):
                size += len(event.data)
                if size > self.max_body:
                    raise ProtocolError(f"an answer over the limit of {self.max_body} bytes")
                parts.append(event.data)
            elif isinstance(event, h11.EndOfMessage):
                _count_fields(len(event.headers), "trailer")
                return response.status_code, b"".join(parts)
            else:
                raise ProtocolError(f"an unexpected {type(event).__name__} in the body")

    def _read_head(self, http: h11.Connection, method: str) -> h11.Response:
        for _ in range(MAX_INTERIM + 1):
            event = self._next_event(http)
            if isinstance(event, h11.Response):
                _count_fields(len(event.headers), "header")
                self._check_framing(event, method)
                return event
            if not isinstance(event, h11.InformationalResponse):
                raise ProtocolError(f"an unexpected {type(event).__name__} before the answer")
            _count_fields(len(event.headers), "header")
        raise ProtocolError(f"more than {MAX_INTERIM} interim (1xx) answers")

    def _check_framing(self, response: h11.Response, method: str) -> None:
        """Refuse a body h11 would read until the connection closes (the relay always says how
        long its answer is), and a declared length over the limit before reading any of it."""
        if method == "HEAD" or response.status_code in _NO_BODY:
            return
        fields = dict(response.headers)  # names lower-cased; h11 has refused conflicting lengths
        if b"transfer-encoding" in fields:
            return  # h11 takes only chunked; its size is checked as the chunks come
        length = fields.get(b"content-length")
        if length is None:
            raise ProtocolError("an answer without a content-length or a chunked body")
        if int(length) > self.max_body:
            raise ProtocolError(f"an answer of {int(length)} bytes, over the limit of {self.max_body}")

    def _next_event(self, http: h11.Connection) -> h11.Event:
        while True:
            try:
                event = http.next_event()
            except h11.RemoteProtocolError as exc:
                if exc.error_status_hint == 431:  # h11's words for it: "Receive buffer too long"
                    raise ProtocolError(f"a head longer than {MAX_HEAD} bytes") from exc
                raise ProtocolError(str(exc) or "a malformed answer") from exc
            if event is h11.PAUSED:  # only after a complete answer, or a protocol switch
                raise ProtocolError("the relay switched protocols")
            if event is not h11.NEED_DATA:
                assert isinstance(event, h11.Event)
                return event
            self._fill(http)

    def _fill(self, http: h11.Connection) -> None:
        assert self._sock is not None
        left = self._deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError(f"the answer took longer than {self.total_s:g} s")
        self._sock.settimeout(min(self.timeout, left))
        chunk = self._sock.recv(65536)
        if not chunk:
            if self._received:
                raise ProtocolError(f"the relay closed the connection {self._received} bytes into its answer")
            raise ConnectionResetError("the relay closed the connection")
        self._received += len(chunk)
        http.receive_data(chunk)


def _count_fields(count: int, kind: str) -> None:
    if count > MAX_FIELDS:
        raise ProtocolError(f"more than {MAX_FIELDS} {kind} fields")
