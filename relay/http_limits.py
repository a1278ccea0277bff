"""`LimitedHttpProtocol`: uvicorn's httptools protocol with the limits a public server needs.

uvicorn's httptools protocol keeps reading a request head as long as the client sends it (one
client held ~10 MB per connection), never times out a connection that sends nothing or sends
its head a byte at a time, and answers its concurrency cap in plain text. This subclass adds,
per connection:

- a cap on the bytes of a request head (request line and headers): 431, then close;
- a cap on the number of headers: 431, then close;
- a deadline for the whole head, counted from the connection's first byte or from the first
  byte of the next request on a kept-alive connection: 408, then close;
- a deadline for the whole body, counted from the end of the head: 408, then close (a body
  trickled in holds a connection, and the request's task, for nothing);
- a cap on open connections (HTTP and WebSocket) over the whole process: 503, then close;
- a cap on open HTTP connections from one peer address (off behind a proxy, where every
  connection comes from the proxy): 503 at once, then close, so one address cannot take the
  whole process's share;
- a malformed request (bad chunk size, bad header syntax): 400, then close, without the
  warning uvicorn would log for each one.

Every refusal is the relay's JSON `{"error", "message"}`. A head is checked after each read,
so a connection holds at most the cap plus one read buffer.

The two deadlines share one timer per connection, which is not armed and cancelled per request
(two timer calls on every request were a twentieth of a busy relay's work): a request moves the
deadline, and the timer, never armed more than the shorter timeout ahead, looks at it when it
fires: past, 408; to come, armed again; none (between requests), left unarmed until the next.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections import Counter
from typing import ClassVar

import httptools
from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol

from relay.config import HttpLimits
from relay.limits import client_address

log = logging.getLogger("talk.relay")


class _Refused(Exception):
    """Raised inside a parser callback to stop parsing a request already answered."""


class LimitedHttpProtocol(HttpToolsProtocol):
    limits = HttpLimits()  # replaced per server by `protocol_for`
    peers: ClassVar[Counter[str]] = Counter()  # open HTTP connections by peer; one per server

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        self._refused = False
        self._peer: str | None = None
        self._reading_head = True
        self._head_bytes = 0
        self._heads = 0  # request heads completed on this connection
        self._header_count = 0
        self._deadline: float | None = None  # when the head or body under way must be whole
        self._timer: asyncio.TimerHandle | None = None
        super().connection_made(transport)
        most = self.limits.max_per_peer
        if most and self.client:
            self._peer = client_address(self.client[0], None, behind_proxy=False)
            self.peers[self._peer] += 1
            if self.peers[self._peer] > most:
                self._refuse(503, "busy", f"more than {most} connections from this address; "
                             "close some first")
                return
        self._await(self.limits.header_timeout_s)

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop_clock()
        self._release_peer()
        super().connection_lost(exc)

    def handle_websocket_upgrade(self) -> None:
        self._release_peer()  # a push stream is capped per mailbox and per handshake rate instead
        self._stop_clock()  # the connection is the WebSocket protocol's from here
        super().handle_websocket_upgrade()

    def _release_peer(self) -> None:
        if self._peer is not None:
            self.peers[self._peer] -= 1
            if self.peers[self._peer] <= 0:
                del self.peers[self._peer]
            self._peer = None

    def data_received(self, data: bytes) -> None:
        if self._refused:
            return
        if self._reading_head and self._deadline is None:  # the first byte of a head
            self._await(self.limits.header_timeout_s)
        self._unset_keepalive_if_required()
        heads, in_head = self._heads, self._reading_head
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            if self._should_upgrade():
                self.handle_websocket_upgrade()
            else:
                self._unsupported_upgrade_warning()
            return
        except httptools.HttpParserError:
            if not self._refused:  # not one of ours: the bytes themselves were malformed
                self._refuse(400, "bad_request", "malformed HTTP request")
            return
        if in_head and self._reading_head and heads == self._heads:  # all of `data` was one unfinished head
            self._head_bytes += len(data)
            if self._head_bytes > self.limits.max_header_bytes:
                self._refuse(431, "headers_too_large",
                             f"request head over {self.limits.max_header_bytes} bytes")

    def on_message_begin(self) -> None:
        self._header_count = 0
        super().on_message_begin()

    def on_header(self, name: bytes, value: bytes) -> None:
        self._header_count += 1
        if self._header_count > self.limits.max_headers:
            self._refuse(431, "headers_too_large", f"more than {self.limits.max_headers} headers")
            raise _Refused
        super().on_header(name, value)

    def on_headers_complete(self) -> None:
        self._reading_head = False
        self._heads += 1
        self._await(self.limits.body_timeout_s)
        if len(self.connections) > self.limits.max_connections:
            log.warning("relay: at the connection cap (%d); refusing with 503", self.limits.max_connections)
            self._refuse(503, "busy", "the relay is at its most open connections; retry shortly")
            raise _Refused
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        super().on_message_complete()
        self._reading_head = True
        self._head_bytes = 0
        self._deadline = None  # nothing is awaited until the next request's first byte

    def _await(self, seconds: float) -> None:
        """The head or body now under way must be whole within `seconds`."""
        self._deadline = self.loop.time() + seconds
        if self._timer is None:
            self._arm(self._deadline)

    def _arm(self, deadline: float) -> None:
        """The timer, at `deadline` or sooner: never more than the shorter timeout ahead, so a
        deadline set later (a head after a body) is never before it."""
        step = min(self.limits.header_timeout_s, self.limits.body_timeout_s)
        self._timer = self.loop.call_at(min(deadline, self.loop.time() + step), self._check_deadline)

    def _check_deadline(self) -> None:
        self._timer = None
        if self._deadline is None or self._refused:
            return
        if self.loop.time() < self._deadline:
            self._arm(self._deadline)
        elif self._reading_head:
            self._refuse(408, "timeout",
                         f"request head not complete within {self.limits.header_timeout_s:g} s")
        else:
            self._refuse(408, "timeout",
                         f"request body not complete within {self.limits.body_timeout_s:g} s")

    def _stop_clock(self) -> None:
        self._deadline = None
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _refuse(self, status: int, code: str, message: str) -> None:
        """Answer with the relay's JSON error and close; a response already under way is not
        interleaved with it: that connection is only closed. A request whose body is still
        awaited has its answer here, and its route, which reads the client as gone, writes none."""
        self._refused = True
        self._stop_clock()
        if self.transport.is_closing():
            return
        cycle = self.cycle
        if cycle is None or cycle.response_complete or not cycle.response_started:
            if cycle is not None and not cycle.response_complete:
                cycle.disconnected = True  # as uvicorn marks a request whose client went away
            body = json.dumps({"error": code, "message": message}).encode()
            self.transport.write(b"".join([
                STATUS_LINE[status], b"content-type: application/json\r\n",
                b"content-length: %d\r\n" % len(body), b"connection: close\r\n\r\n", body,
            ]))
        self.transport.close()


def protocol_for(limits: HttpLimits) -> type[LimitedHttpProtocol]:
    """The protocol class uvicorn instantiates per connection, carrying these limits."""
    return type("RelayHttpProtocol", (LimitedHttpProtocol,), {"limits": limits, "peers": Counter()})
