"""`Stream`: a WebSocket client read on its caller's thread (websockets' Sans-I/O protocol on
one socket), for the relay's push stream.

websockets' threaded client reads the socket in a thread of its own and hands each message to
the thread that asked for it: for every pushed message one more thread to wake, ~0.07 ms on a
small machine at work and several times that on a core that was asleep. Here the push thread
reads the socket itself and takes the message a frame carries at once (`PushListener`).

What the threaded client did for the push stream is done here: no extension is offered (no
compression); a message over `max_size` closes the connection with 1009 and a malformed frame
with 1002 (the close frame is sent before the socket closes); pings are answered; a ping goes
out after `ping_interval` seconds without a byte from the relay, and a relay silent
`ping_timeout` seconds more is taken for gone. `close` may be called from any thread: it shuts
the socket, which ends a read under way.
"""

from __future__ import annotations

import contextlib
import os
import socket
import time
from collections.abc import Iterator
from types import TracebackType
from urllib.parse import urlsplit

from websockets.client import ClientProtocol
from websockets.frames import Frame, Opcode
from websockets.protocol import State
from websockets.uri import parse_uri

__all__ = ["Stream", "StreamClosed"]

READ_SIZE = 64 * 1024
WRITE_TIMEOUT_S = 10.0
CLOSE_TIMEOUT_S = 2.0


class StreamClosed(ConnectionError):
    """The relay closed the stream, broke the protocol, or went silent."""


class Stream:
    def __init__(self, sock: socket.socket, protocol: ClientProtocol, ping_interval: float,
                 ping_timeout: float) -> None:
        self._sock = sock
        self._protocol = protocol
        self._ping_interval = ping_interval
        self._ping_timeout = ping_timeout
        self._pending: list[Frame] = []  # what came with the handshake's answer

    @classmethod
    def open(cls, url: str, headers: dict[str, str], timeout: float, max_size: int,
             ping_interval: float = 20.0, ping_timeout: float = 20.0) -> Stream:
        """Connect to `url` (ws:// or wss://) and complete the handshake within `timeout`.

        Raises:
            websockets.exceptions.InvalidStatus: the relay answered the handshake with an error.
            websockets.exceptions.InvalidHandshake: any other answer than a WebSocket's.
            OSError: the connection failed or timed out (TimeoutError).
        """
        parts = urlsplit(url)
        secure = parts.scheme == "wss"
        host = parts.hostname or ""
        sock = socket.create_connection((host, parts.port or (443 if secure else 80)), timeout)
        try:
            if secure:
                import ssl

                sock = ssl.create_default_context().wrap_socket(sock, server_hostname=host)
            protocol = ClientProtocol(parse_uri(url), max_size=max_size)
            request = protocol.connect()
            for name, value in headers.items():
                request.headers[name] = value
            protocol.send_request(request)
            stream = cls(sock, protocol, ping_interval, ping_timeout)
            stream._handshake(time.monotonic() + timeout)
        except BaseException:
            sock.close()
            raise
        return stream

    def _handshake(self, deadline: float) -> None:
        self._flush()
        while self._protocol.state is State.CONNECTING:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("the relay did not answer the stream's handshake in time")
            self._sock.settimeout(left)
            self._receive(self._sock.recv(READ_SIZE))
            if self._protocol.handshake_exc is not None:
                raise self._protocol.handshake_exc
            self._pending += self._frames()
        self._flush()  # a pong for a ping that came with the answer

    def __enter__(self) -> Stream:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._sock.close()

    def fileno(self) -> int:
        """The socket's descriptor (to wait on it with `select`)."""
        return self._sock.fileno()

    def close(self) -> None:
        """End the stream from any thread: a read under way returns, and `messages` ends."""
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_RDWR)

    def messages(self) -> Iterator[bytes]:
        """Each text or binary message the relay sends, as bytes, until the stream ends.

        Raises:
            StreamClosed: the relay closed it, broke the protocol (after the close frame that
                says so is sent), or stayed silent past the ping's timeout.
            OSError: the connection failed.
        """
        parts: list[bytes] = []
        heard = time.monotonic()
        pinged: float | None = None
        frames, self._pending = self._pending, []
        while True:
            for frame in frames:
                if frame.opcode in (Opcode.TEXT, Opcode.BINARY, Opcode.CONT):
                    parts.append(bytes(frame.data))  # the protocol bounds a fragmented message's size
                    if frame.fin:
                        message, parts = b"".join(parts), []
                        yield message
            if self._protocol.state is State.CLOSED or self._protocol.close_expected():
                self._flush()  # the close frame, if the protocol failed the connection
                self._await_close()
                raise StreamClosed(f"the relay closed the push stream ({self._why()})")
            now = time.monotonic()
            if pinged is None and now - heard >= self._ping_interval:
                self._protocol.send_ping(os.urandom(4))
                self._flush()
                pinged = now
            if pinged is not None and now - pinged >= self._ping_timeout:
                raise StreamClosed(f"the relay did not answer a ping in {self._ping_timeout:g} s")
            due = (pinged + self._ping_timeout) if pinged is not None else (heard + self._ping_interval)
            self._sock.settimeout(max(0.01, due - now))
            try:
                data = self._sock.recv(READ_SIZE)
            except TimeoutError:
                frames = []
                continue
            heard, pinged = time.monotonic(), None
            self._receive(data)
            frames = self._frames()
            self._flush()  # pongs, and the close frame of a connection the protocol failed

    def _await_close(self) -> None:
        """Read, and drop, what the relay still sends until it closes the connection (at most
        CLOSE_TIMEOUT_S): a socket closed with unread data resets the connection, and the
        relay could lose the close frame that says why."""
        deadline = time.monotonic() + CLOSE_TIMEOUT_S
        with contextlib.suppress(OSError):
            while (left := deadline - time.monotonic()) > 0:
                self._sock.settimeout(left)
                if not self._sock.recv(READ_SIZE):
                    return

    def _frames(self) -> list[Frame]:
        """The frames parsed since the last call (the handshake's answer is the other event)."""
        return [e for e in self._protocol.events_received() if isinstance(e, Frame)]

    def _receive(self, data: bytes) -> None:
        if data:
            self._protocol.receive_data(data)
        else:
            self._protocol.receive_eof()

    def _flush(self) -> None:
        out = self._protocol.data_to_send()
        if out:
            self._sock.settimeout(WRITE_TIMEOUT_S)
            with contextlib.suppress(OSError):  # a relay gone: the next read says so
                self._sock.sendall(b"".join(out))

    def _why(self) -> str:
        exc = self._protocol.parser_exc
        if exc is not None:
            return str(exc) or type(exc).__name__
        received = self._protocol.close_rcvd
        return f"code {received.code}" if received is not None else "connection lost"
