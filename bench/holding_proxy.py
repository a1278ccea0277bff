"""A loopback proxy in front of the relay that can hold a sealed message back and let it go later.

Late mail, made the way a slow or hostile relay (or a network) makes it: a deposit reaches the
relay long after it was sent, after later mail has come and gone. The proxy forwards every
request and answer untouched (HTTP/1.1 kept alive; a WebSocket upgrade, the follower's push
stream, is piped both ways), except a deposit it was told to hold: that one it keeps, and answers
the sender as the relay answers a deposit it stored (201, {"id": ...}), so the sender sees it
stored. While a deposit is held, a deposit of the very same blob (a resend: the outbox resends the
sealed bytes it kept) is answered the same way and dropped, or it would arrive early. `release`
deposits each held blob at the relay itself, once.

Two ports: `send_url` for `talk send` (a hold applies to the next deposit for the recipient named
in `hold_next`) and `url` for everything else (the followers: their receipts and resends pass,
their resends of a held blob excepted), so a follower's deposit for the same recipient is never
the one held by mistake.
"""

from __future__ import annotations

import contextlib
import hashlib
import http.client
import itertools
import json
import socket
import threading
from dataclasses import dataclass
from typing import BinaryIO

__all__ = ["Held", "HoldingProxy"]

MAIL = "/v1/mail/"
OWNER_ROUTES = frozenset({"session", "fetch", "ack", "purge", "stream"})
MAX_HEAD = 64 * 1024


@dataclass
class Held:
    fp: str  # the recipient
    path: str
    body: bytes
    turn: int  # when it was held, in the caller's turns


def _deposit_fp(method: str, path: str) -> str | None:
    """The recipient of a deposit (POST /v1/mail/FP/TAG); None for any other request."""
    if method != "POST" or not path.startswith(MAIL):
        return None
    parts = path[len(MAIL):].split("/")
    if len(parts) != 2 or parts[1] in OWNER_ROUTES:
        return None
    return parts[0]


def _read_head(stream: BinaryIO) -> tuple[bytes, dict[str, str]] | None:
    """A request's or an answer's head (its start line and fields, as read) and its fields by
    lower-case name; None at a clean end of the connection."""
    lines: list[bytes] = []
    size = 0
    while True:
        line = stream.readline(MAX_HEAD)
        if not line:
            return None
        lines.append(line)
        size += len(line)
        if line in (b"\r\n", b"\n") or size > MAX_HEAD:
            break
    fields: dict[str, str] = {}
    for line in lines[1:-1]:
        name, _, value = line.decode("latin-1").partition(":")
        fields[name.strip().lower()] = value.strip()
    return b"".join(lines), fields


def _read_body(stream: BinaryIO, fields: dict[str, str], to_close: bool) -> bytes:
    """The body that follows a head, as read (chunked ones with their framing)."""
    if "content-length" in fields:
        return stream.read(int(fields["content-length"]))
    if fields.get("transfer-encoding", "").lower() == "chunked":
        out = b""
        while True:
            size_line = stream.readline(MAX_HEAD)
            out += size_line
            size = int(size_line.split(b";")[0].strip() or b"0", 16)
            if size == 0:
                while True:  # trailer fields, then the blank line
                    trailer = stream.readline(MAX_HEAD)
                    out += trailer
                    if trailer in (b"\r\n", b"\n", b""):
                        return out
            out += stream.read(size + 2)
    return stream.read() if to_close else b""


class HoldingProxy:
    def __init__(self, relay_port: int) -> None:
        self.relay_port = relay_port
        self.lock = threading.Lock()
        self.armed: set[str] = set()  # recipients whose next deposit through send_url is held
        self.held: list[Held] = []
        self.holding: dict[str, Held] = {}  # a held blob's digest: its resends are dropped too
        self.swallowed = 0  # resends of held blobs answered and dropped
        self.turn = 0  # the caller's turn, kept with each hold
        self._ids = itertools.count(10 ** 12)
        self._listeners = [socket.create_server(("127.0.0.1", 0)) for _ in range(2)]
        self.url, self.send_url = (f"http://127.0.0.1:{s.getsockname()[1]}" for s in self._listeners)
        for listener, may_hold in zip(self._listeners, (False, True), strict=True):
            threading.Thread(target=self._accept, args=(listener, may_hold), daemon=True).start()

    def hold_next(self, fp: str) -> None:
        """Hold the next deposit sent through `send_url` to the mailbox `fp`."""
        with self.lock:
            self.armed.add(fp)

    def disarm(self, fp: str) -> None:
        with self.lock:
            self.armed.discard(fp)

    def due(self, turn: int, after: int) -> list[Held]:
        """The held deposits kept since `after` turns or more before `turn`."""
        with self.lock:
            return [h for h in self.held if turn - h.turn >= after]

    def release(self, held: Held) -> None:
        """Deposit `held` at the relay now, and let its resends through from here on."""
        conn = http.client.HTTPConnection("127.0.0.1", self.relay_port, timeout=30)
        try:
            conn.request("POST", held.path, held.body, {"content-type": "application/octet-stream"})
            answer = conn.getresponse()
            answer.read()
        finally:
            conn.close()
        with self.lock:
            self.held.remove(held)
            self.holding.pop(hashlib.sha256(held.body).hexdigest(), None)

    def close(self) -> None:
        for listener in self._listeners:
            listener.close()

    def _accept(self, listener: socket.socket, may_hold: bool) -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn, may_hold), daemon=True).start()

    def _keep(self, fp: str, path: str, body: bytes, may_hold: bool) -> bool:
        """Whether this deposit is held (or a resend of a held one): answered here, not passed."""
        digest = hashlib.sha256(body).hexdigest()
        with self.lock:
            if digest in self.holding:
                self.swallowed += 1
                return True
            if may_hold and fp in self.armed:
                self.armed.discard(fp)
                held = Held(fp, path, body, self.turn)
                self.held.append(held)
                self.holding[digest] = held
                return True
        return False

    def _serve(self, client: socket.socket, may_hold: bool) -> None:
        upstream: socket.socket | None = None
        up_reader: BinaryIO | None = None
        try:
            reader = client.makefile("rb")
            while True:
                head = _read_head(reader)
                if head is None:
                    return
                raw, fields = head
                method, path = raw.split(b" ", 2)[:2]
                if fields.get("upgrade", "").lower() == "websocket":
                    self._pipe(client, raw)
                    return
                body = _read_body(reader, fields, False)
                fp = _deposit_fp(method.decode(), path.decode())
                if fp is not None and self._keep(fp, path.decode(), body, may_hold):
                    answer = json.dumps({"id": str(next(self._ids))}).encode()
                    client.sendall(b"HTTP/1.1 201 Created\r\ncontent-type: application/json\r\n"
                                   b"content-length: %d\r\n\r\n%s" % (len(answer), answer))
                    continue
                if upstream is None or up_reader is None:
                    upstream = socket.create_connection(("127.0.0.1", self.relay_port))
                    up_reader = upstream.makefile("rb")
                upstream.sendall(raw + body)
                answer_head = _read_head(up_reader)
                if answer_head is None:
                    return
                answer_raw, answer_fields = answer_head
                closing = answer_fields.get("connection", "").lower() == "close"
                status = int(answer_raw.split(b" ", 2)[1])
                no_body = method == b"HEAD" or status in (204, 304) or status < 200
                answer_body = b"" if no_body else _read_body(up_reader, answer_fields, closing)
                client.sendall(answer_raw + answer_body)
                if closing or fields.get("connection", "").lower() == "close":
                    return
        except OSError:
            return
        finally:
            client.close()
            if upstream is not None:
                upstream.close()

    def _pipe(self, client: socket.socket, head: bytes) -> None:
        """A WebSocket: the upgrade goes to the relay, then bytes flow both ways until either
        end closes."""
        upstream = socket.create_connection(("127.0.0.1", self.relay_port))
        upstream.sendall(head)  # the client sends nothing more before the relay's 101

        def copy(src: socket.socket, dst: socket.socket) -> None:
            try:
                while data := src.recv(65536):
                    dst.sendall(data)
            except OSError:
                pass
            finally:
                for s in (src, dst):
                    with contextlib.suppress(OSError):
                        s.shutdown(socket.SHUT_RDWR)

        back = threading.Thread(target=copy, args=(upstream, client), daemon=True)
        back.start()
        copy(client, upstream)
        back.join()
        upstream.close()
