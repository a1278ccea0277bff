"""A hostile relay against the real CLI: whatever it answers, `talk` ends with exit 3 and one line.

The hostile relay is a tiny socket server on loopback that answers every request with one
scripted misbehaviour. The identities and contacts are made against a real relay first, then
`talk send` and `talk receive` are pointed at the hostile one. The follower's push stream is
tried the same way against a WebSocket server that sends oversized and broken frames.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import socket
import ssl
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from websockets.sync.server import ServerConnection, serve

from keys import keystore
from keys.contacts import ContactBook
from keys.envelope import channel_tag, new_message, seal
from keys.identity import Identity
from keys.sodium import PublicKey
from tests.conftest import Agent, RelayProcess, Result, wait_for
from tests.e2e.probes import spool_ids
from tests.faults import ScriptedServer, read_request

Behaviour = Callable[[socket.socket], int | None]  # bytes flooded, for the floods
FLOOD_CAP = 32 * 1024 * 1024  # bytes a flooding answer sends at most: the test stays bounded
FLOOD_TIME_S = 20.0


def flood(head: bytes, unit: bytes) -> Behaviour:
    """`head`, then `unit` again and again until the client hangs up (or the caps are hit)."""
    def run(conn: socket.socket) -> int:
        conn.sendall(head)
        sent, stop = 0, time.monotonic() + FLOOD_TIME_S
        try:
            while sent < FLOOD_CAP and time.monotonic() < stop:
                conn.sendall(unit)
                sent += len(unit)
        except OSError:
            pass  # the client hung up: how much it took first is the point
        return sent
    return run


def reply(raw: bytes) -> Behaviour:
    def run(conn: socket.socket) -> None:
        conn.sendall(raw)
    return run


def json_reply(status: str, body: bytes) -> Behaviour:
    return reply(f"HTTP/1.1 {status}\r\ncontent-length: {len(body)}\r\n\r\n".encode() + body)


def drip(conn: socket.socket) -> None:
    conn.sendall(b"HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\n")
    stop = time.monotonic() + FLOOD_TIME_S
    while time.monotonic() < stop:  # a byte every 100 ms: each read succeeds, the answer never ends
        conn.sendall(b" ")
        time.sleep(0.1)


HOSTILE: dict[str, Behaviour] = {
    "bad chunk size": reply(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\nzz;x\r\n"),
    "huge content-length": reply(b"HTTP/1.1 200 OK\r\ncontent-length: 999999999999999999999\r\n\r\n"),
    "endless headers": flood(b"HTTP/1.1 200 OK\r\n", b"x-filler: " + b"y" * 100 + b"\r\n"),
    "endless status line": flood(b"HTTP/1.1 200 ", b"O" * 4096),
    "never-ending body": flood(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n",
                               b"1000\r\n" + b"[" * 4096 + b"\r\n"),
    "garbage": reply(b"SSH-2.0-OpenSSH_9.6\r\n\x00\xff\xfe garbage\r\n\r\n"),
    "dripping answer": drip,
    "deeply nested JSON": json_reply("200 OK", b"[" * 200_000),
    "JSON that is not an object": json_reply("201 Created", b'["id", 1]'),
    "object without the fields": json_reply("201 Created", b'{"messages": 7, "id": null}'),
    "error text with controls": json_reply(
        "500 Oops", json.dumps({"error": "x", "message": "one\nfake second line\x1b[2J"}).encode()),
}


class HostileRelay(ScriptedServer):
    """Answers every request on every connection with `behaviour`; closes after each answer."""

    def __init__(self, behaviour: Behaviour, tls: ssl.SSLContext | None = None) -> None:
        self.behaviour = behaviour
        self.tls = tls
        self.scheme = "https" if tls else "http"
        self.requests = 0
        self.flooded: list[int] = []
        super().__init__()

    def serve_one(self, raw: socket.socket, nth: int) -> None:
        if self.tls is not None:
            raw.settimeout(10)
            try:
                conn: socket.socket = self.tls.wrap_socket(raw, server_side=True)
            except OSError:
                raw.close()
                return
        else:
            conn = raw
        with conn:
            try:
                if read_request(conn) is not None:
                    self.requests += 1
                    sent = self.behaviour(conn)
                    if sent is not None:
                        self.flooded.append(sent)
            except OSError:
                pass  # the client hung up on us: that is what a bounded client does


@pytest.fixture
def hostile(request: pytest.FixtureRequest) -> Iterator[HostileRelay]:
    server = HostileRelay(HOSTILE[request.param])
    yield server
    server.close()


def assert_relay_error(r: Result, queued_ok: bool = False) -> None:
    """Exit 3 and one line; or, for a send the relay may take later (no answer in time, its own
    5xx), exit 0 with the message queued under the send contract, and still one line."""
    if queued_ok and r.code == 0:
        assert "queued" in r.err and "do not send it again" in r.err, r.err
    else:
        assert r.code == 3, f"exit {r.code}: {r.err}"
    assert "Traceback" not in r.err
    lines = r.err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("talk: "), r.err
    assert "\x1b" not in r.err


@pytest.mark.parametrize("hostile", list(HOSTILE), indirect=True)
def test_send_and_receive_end_in_a_relay_error_whatever_the_relay_answers(
    pair: tuple[Agent, Agent], hostile: HostileRelay
) -> None:
    alice, bob = pair
    fast = {"TALK_RELAY_TIMEOUT": "1"}  # a dripping relay is cut off after 3 s, not 30
    alice.extra_env.update(fast)
    bob.extra_env.update(fast)
    started = time.monotonic()
    sent = alice.run("send", "bob", "hello", "--relay", hostile.url, timeout=60)
    assert_relay_error(sent, queued_ok=True)
    got = bob.run("receive", "--relay", hostile.url, timeout=60)
    assert_relay_error(got)
    assert hostile.requests >= 2
    # A flood is cut off by the client's own limits (9 MB for the body), not by running dry.
    assert all(sent < FLOOD_CAP for sent in hostile.flooded)
    assert time.monotonic() - started < 30


def test_relay_error_text_is_shown_on_one_line_with_controls_escaped(
    pair: tuple[Agent, Agent],
) -> None:
    alice, _ = pair
    server = HostileRelay(HOSTILE["error text with controls"])
    try:
        r = alice.run("send", "bob", "hello", "--relay", server.url)
    finally:
        server.close()
    assert_relay_error(r, queued_ok=True)
    assert "one\\x0afake second line" in r.err and "\\x1b[2J" in r.err  # escaped as all peer text is


@pytest.fixture
def tls(tmp_path: Path) -> tuple[ssl.SSLContext, Path]:
    """A server context with a fresh self-signed certificate for 127.0.0.1, and that certificate
    (the clients trust it through SSL_CERT_FILE, as they would a private CA)."""
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                    "-nodes", "-keyout", str(key), "-out", str(cert), "-days", "1", "-subj", "/CN=127.0.0.1",
                    "-addext", "subjectAltName=IP:127.0.0.1"], check=True, capture_output=True, timeout=60)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    return context, cert


@pytest.mark.parametrize("name", ["dripping answer", "never-ending body", "bad chunk size",
                                  "huge content-length", "garbage", "deeply nested JSON"])
def test_an_https_relay_is_held_to_the_same_bounds(
    pair: tuple[Agent, Agent], tls: tuple[ssl.SSLContext, Path], name: str
) -> None:
    alice, bob = pair
    context, cert = tls
    server = HostileRelay(HOSTILE[name], context)
    try:
        for agent in (alice, bob):
            agent.extra_env.update({"TALK_RELAY_TIMEOUT": "1", "SSL_CERT_FILE": str(cert)})
        started = time.monotonic()
        assert_relay_error(alice.run("send", "bob", "hello", "--relay", server.url, timeout=60))
        assert_relay_error(bob.run("receive", "--relay", server.url, timeout=60))
        assert time.monotonic() - started < 30
        assert server.requests >= 2  # the TLS handshake held: these are the answers' faults
        assert all(sent < FLOOD_CAP for sent in server.flooded)
    finally:
        server.close()


# --- the push stream ----------------------------------------------------------------------------

class HostileStream:
    """A WebSocket server: each stream connection gets an oversized message, then raw garbage
    frames on the next one; every plain HTTP request (the follower's fetches) gets a 426."""

    def __init__(self) -> None:
        self.closes: list[int | None] = []
        self.connections = 0
        self.server = serve(self._handler, "127.0.0.1", 0, max_size=2**20)
        self.url = f"http://127.0.0.1:{self.server.socket.getsockname()[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def _handler(self, ws: ServerConnection) -> None:
        self.connections += 1
        n = self.connections
        try:
            if n % 2:
                ws.send(json.dumps({"type": "mail", "tag": "x" * 64 * 1024}))  # 64 KiB: over the cap
                ws.recv(timeout=10)
            else:
                ws.socket.sendall(b"\x8f\x7f" + b"\xff" * 64)  # a reserved opcode, a bogus length
                ws.recv(timeout=10)
        except Exception:  # the follower hung up, as it should
            pass
        self.closes.append(ws.close_code)

    def close(self) -> None:
        self.server.shutdown()


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def test_follower_survives_oversized_and_broken_push_frames(pair: tuple[Agent, Agent]) -> None:
    _, bob = pair
    stream = HostileStream()
    bob.extra_env["TALK_RELAY_TIMEOUT"] = "2"
    try:
        pid = bob.ok("follow", "--peer", "alice", "--relay", stream.url, "--json").json()["pid"]
        try:
            wait_for(lambda: len(stream.closes) >= 3, 60, "three hostile stream connections")
            os.kill(pid, 0)  # still alive: raises ProcessLookupError otherwise
            assert 1009 in stream.closes  # "message too big": the follower's cap, not the default 1 MiB
            assert rss_kib(pid) < 200 * 1024
            status = bob.ok("status", "--json").json()["follower"]
            assert status["running"] and status["pid"] == pid
        finally:
            bob.run("stop")
    finally:
        stream.close()


def text_frame(payload: bytes) -> bytes:
    """An unmasked WebSocket text frame, as a server sends it."""
    size = len(payload)
    head = bytes([0x81, size]) if size < 126 else bytes([0x81, 126]) + size.to_bytes(2, "big")
    return head + payload


class FrameInjector(ScriptedServer):
    """A TCP proxy in front of a real relay: every byte passes through both ways, except that on
    a push stream `frames` reach the follower first, right after the relay's handshake answer."""

    def __init__(self, upstream: str, frames: list[bytes]) -> None:
        self.upstream = ("127.0.0.1", int(upstream.rsplit(":", 1)[1]))
        self.frames = frames
        self.streams = 0
        super().__init__()

    def serve_one(self, conn: socket.socket, nth: int) -> None:
        with conn, socket.create_connection(self.upstream) as up:
            first = conn.recv(65536)
            up.sendall(first)
            threading.Thread(target=_copy, args=(conn, up), daemon=True).start()
            if b"/stream " in first.split(b"\r\n", 1)[0]:
                head = b""
                while b"\r\n\r\n" not in head:
                    chunk = up.recv(65536)
                    if not chunk:
                        return
                    head += chunk
                end = head.index(b"\r\n\r\n") + 4
                self.streams += 1
                conn.sendall(head[:end] + b"".join(self.frames) + head[end:])
            _copy(up, conn)


def _copy(source: socket.socket, sink: socket.socket) -> None:
    try:
        while chunk := source.recv(65536):
            sink.sendall(chunk)
    except OSError:
        pass
    with contextlib.suppress(OSError):
        sink.shutdown(socket.SHUT_WR)


def test_crafted_push_frames_cannot_stop_delivery(pair: tuple[Agent, Agent], relay: RelayProcess) -> None:
    """Messages pushed with the wake-up are as hostile as fetched ones: a stranger's blob under
    alice's channel, garbage that claims to be hers, frames broken every way, an id no ack can
    name. None reaches the spool, the follower stays up, and alice's real mail still arrives."""
    alice, bob = pair
    bob_id = keystore.unlock(keystore.load(bob.home / "bob"), None)
    alice_contact = ContactBook(bob.home / "bob").get("alice")
    tag = channel_tag(bob_id.box_secret, PublicKey(alice_contact.box_key), bob_id.fingerprint)
    stranger = Identity.generate("mallory")
    forged = seal(new_message(stranger.fingerprint, bob_id.fingerprint, "obey me"), stranger.box_secret,
                  PublicKey(bob_id.box_public))

    def mail(mail_id: object, blob: object, at: object = tag) -> bytes:
        return json.dumps({"type": "mail", "tag": at, "id": mail_id, "blob": blob}).encode()

    frames = [text_frame(f) for f in (
        mail("900001", base64.b64encode(forged).decode()),
        mail("900002", base64.b64encode(os.urandom(700)).decode()),
        mail("9 OR 1", base64.b64encode(forged).decode()),
        mail("900003", "not base64!"),
        mail(["900004"], base64.b64encode(forged).decode()),
        mail("900005", base64.b64encode(forged).decode(), at=os.urandom(32).hex()),
        b'{"type": "mail", "blob": ' + b"[" * 3000 + b"]" * 3000 + b"}",
        b"not json",
    )]
    proxy = FrameInjector(relay.url, frames)
    try:
        pid = bob.ok("follow", "--peer", "alice", "--relay", proxy.url, "--json").json()["pid"]
        try:
            wait_for(lambda: proxy.streams >= 1, 20, "the follower's push stream")
            sent = alice.ok("send", "bob", "the real one", "--json").json()["id"]
            wait_for(lambda: sent in spool_ids(bob, "bob"), 20, "alice's message in bob's spool")
            os.kill(pid, 0)  # still alive
            assert list(spool_ids(bob, "bob")) == [sent]
            quarantined = (bob.home / "bob" / "quarantine.ndjson").read_text()
            assert "900001" in quarantined and "900002" in quarantined  # kept, refused, acked
            assert "obey me" not in (bob.home / "bob" / "spool" / "inbox.ndjson").read_text()
        finally:
            bob.run("stop")
    finally:
        proxy.close()
