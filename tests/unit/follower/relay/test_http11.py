"""The minimal HTTP/1.1 client against a scripted loopback server: framing edge cases."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable

import pytest

from follower.relay.http11 import MAX_FIELDS, Connection, ProtocolError, _host_field
from tests.faults import ScriptedServer, read_request


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


def test_peer_closing_midway_is_a_protocol_error() -> None:
    port, _ = serve([b"HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\nshort"])
    conn = Connection("127.0.0.1", port, timeout=5)
    with pytest.raises(ProtocolError, match="closed the connection"):
        conn.exchange("GET", "/", b"", {})


def test_peer_closing_before_answering_is_a_connection_reset() -> None:
    """What a kept-alive connection the relay has dropped looks like: the caller retries."""
    port, _ = serve([b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n{}"])
    conn = Connection("127.0.0.1", port, timeout=5)
    assert conn.exchange("GET", "/", b"", {}) == (200, b"{}")
    with pytest.raises((ConnectionResetError, BrokenPipeError)):  # the two the client retries
        conn.exchange("GET", "/", b"", {})


def answer_with(reply: bytes) -> Connection:
    port, _ = serve([reply])
    return Connection("127.0.0.1", port, timeout=5, max_body=1000)


@pytest.mark.parametrize("reply", [
    pytest.param(b"HTTP/1.1 200 OK" + b"!" * 20_000 + b"\r\n\r\n", id="status line too long"),
    pytest.param(b"HTTP/1.1 200 OK\r\nx-a: " + b"b" * 20_000 + b"\r\n\r\n", id="field too long"),
    pytest.param(b"HTTP/1.1 200 OK\r\n" + b"x-a: b\r\n" * 200 + b"\r\n", id="too many fields"),
    pytest.param(b"HTTP/1.1 200 OK\r\ncontent-length: 99999999999999999999\r\n\r\n", id="huge length"),
    pytest.param(b"HTTP/1.1 200 OK\r\ncontent-length: 1001\r\n\r\n", id="length over the cap"),
    pytest.param(b"HTTP/1.1 200 OK\r\ncontent-length: -5\r\n\r\n", id="negative length"),
    pytest.param(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\ncontent-length: 3\r\n\r\n{}", id="two lengths"),
    pytest.param(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\nzz\r\n", id="chunk size not hex"),
    pytest.param(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n-5\r\n", id="negative chunk"),
    pytest.param(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\nfffffffffffffff\r\n",
                 id="chunk size huge"),
    pytest.param(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n" + b"100\r\n" + b"x" * 256
                 + b"\r\n" + b"300\r\n", id="chunks over the cap"),
    pytest.param(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n2\r\n{}XX", id="chunk without CRLF"),
    pytest.param(b"HTTP/1.1 200 OK\r\ntransfer-encoding: gzip\r\n\r\n", id="unknown coding"),
    pytest.param(b"HTTP/1.1 2000 OK\r\ncontent-length: 0\r\n\r\n", id="status of four digits"),
    pytest.param(b"HTTP/1.1 200 OK\r\nno colon here\r\n\r\n", id="field without colon"),
])
def test_every_malformed_or_oversized_answer_is_a_protocol_error(reply: bytes) -> None:
    with pytest.raises(ProtocolError):
        answer_with(reply).exchange("GET", "/", b"", {})


def test_a_relay_that_drips_its_answer_is_cut_off_after_the_total_time() -> None:
    listener = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def drip() -> None:
        conn, _ = listener.accept()
        with conn:
            conn.recv(4096)
            conn.sendall(b"HTTP/1.1 200 OK\r\n")
            while not stop.is_set():  # one header byte every 50 ms, never the end
                try:
                    conn.sendall(b"x")
                except OSError:
                    return
                stop.wait(0.05)

    threading.Thread(target=drip, daemon=True).start()
    conn = Connection("127.0.0.1", listener.getsockname()[1], timeout=5, total_s=0.5)
    started = time.monotonic()
    try:
        with pytest.raises(OSError) as err:
            conn.exchange("GET", "/", b"", {})
    finally:
        stop.set()
        listener.close()
    assert isinstance(err.value, TimeoutError | ProtocolError)
    assert time.monotonic() - started < 5  # the per-read timeout alone would never fire


def test_trailers_are_read_and_dropped() -> None:
    body = b"2\r\n{}\r\n0\r\nx-trailer: 1\r\n\r\n"
    conn = answer_with(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n" + body)
    assert conn.exchange("GET", "/", b"", {}) == (200, b"{}")
    conn.close()


# Hostile answers over a real loopback socket. The server keeps each first connection open after
# misbehaving, so a client that waited for more bytes would end in a TimeoutError, not the
# ProtocolError these tests expect; later connections get a good answer.

Behaviour = Callable[[socket.socket], None]
FLOOD_CAP = 16 * 1024 * 1024  # bytes a flood sends at most, so a broken client cannot hang the test
TIMEOUT_S = 3.0


def flood(head: bytes, unit: bytes) -> Behaviour:
    def run(conn: socket.socket) -> None:
        conn.sendall(head)
        for _ in range(FLOOD_CAP // len(unit)):
            conn.sendall(unit)
    return run


def reply(raw: bytes) -> Behaviour:
    return lambda conn: conn.sendall(raw)


def truncate(raw: bytes) -> Behaviour:
    def run(conn: socket.socket) -> None:
        conn.sendall(raw)
        conn.shutdown(socket.SHUT_WR)
    return run


class HostileServer(ScriptedServer):
    """The first connection gets `behaviour`; each later one a good answer to every request."""

    def __init__(self, behaviour: Behaviour) -> None:
        self.behaviour = behaviour
        self.first_closed = threading.Event()  # the client hung up on the misbehaving connection
        super().__init__()

    def serve_one(self, conn: socket.socket, nth: int) -> None:
        (self._misbehave if nth == 1 else self._answer_well)(conn)

    def _misbehave(self, conn: socket.socket) -> None:
        with conn:
            conn.settimeout(10 * TIMEOUT_S)
            try:
                if read_request(conn) is None:
                    return
                self.behaviour(conn)
                while conn.recv(4096):
                    pass
            except OSError:
                pass  # a reset: the client hung up mid-flood
            self.first_closed.set()

    def _answer_well(self, conn: socket.socket) -> None:
        with conn:
            while read_request(conn) is not None:
                conn.sendall(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n{}")


CAP = 64 * 1024
OK = b"HTTP/1.1 200 OK\r\n"
CHUNKED = OK + b"transfer-encoding: chunked\r\n\r\n"
ATTACKS: dict[str, Behaviour] = {
    "endless headers": flood(OK, b"x-filler: " + b"y" * 50 + b"\r\n"),
    "a huge header line": flood(OK + b"x-big: ", b"y" * 4096),
    "an endless status line": flood(b"HTTP/1.1 200 ", b"O" * 4096),
    "too many headers": reply(OK + b"x: y\r\n" * (MAX_FIELDS + 1) + b"content-length: 0\r\n\r\n"),
    "too many trailers": reply(CHUNKED + b"0\r\n" + b"x: y\r\n" * (MAX_FIELDS + 1) + b"\r\n"),
    "a declared length over the cap": flood(OK + f"content-length: {CAP + 1}\r\n\r\n".encode(), b"x" * 4096),
    "a chunked body over the cap": flood(CHUNKED, b"1000\r\n" + b"x" * 4096 + b"\r\n"),
    "one chunk over the cap": flood(CHUNKED + b"fffffffffff\r\n", b"x" * 4096),
    "a chunk size that is not hex": reply(CHUNKED + b"zz\r\n"),
    "a negative chunk size": reply(CHUNKED + b"-1\r\n"),
    "a chunk size of 30 digits": reply(CHUNKED + b"1" * 30 + b"\r\n"),
    "a body cut short": truncate(OK + b"content-length: 100\r\n\r\nshort"),
    "a chunked body cut short": truncate(CHUNKED + b"10\r\nshort"),
    "a head cut short": truncate(OK + b"content-len"),
    "no status line": reply(b"content-length: 2\r\n\r\n{}"),
    "an unknown transfer coding": reply(OK + b"transfer-encoding: gzip\r\n\r\n"),
    "conflicting lengths": reply(OK + b"content-length: 2\r\ncontent-length: 3\r\n\r\n{}"),
    "a body until the connection closes": truncate(OK + b"\r\n{}"),
    "endless interim answers": flood(b"", b"HTTP/1.1 103 Early Hints\r\n\r\n"),
}


@pytest.mark.parametrize("attack", list(ATTACKS))
def test_a_hostile_answer_is_a_quick_protocol_error_and_the_connection_is_dropped(attack: str) -> None:
    server = HostileServer(ATTACKS[attack])
    conn = Connection("127.0.0.1", server.port, timeout=TIMEOUT_S, max_body=CAP)
    started = time.monotonic()
    try:
        with pytest.raises(ProtocolError):
            conn.exchange("GET", "/", b"", {})
        assert time.monotonic() - started < TIMEOUT_S  # refused at once, not waited out
        assert server.first_closed.wait(TIMEOUT_S)
        assert conn.exchange("GET", "/", b"", {}) == (200, b"{}")
        assert server.connections == 2
    finally:
        conn.close()
        server.close()


def two_good_answers_on_two_connections(
    server: HostileServer, between: Callable[[], object] = lambda: None
) -> None:
    """Two requests both get the good answer, the second on a new connection: what the first
    connection did wrong made the client drop it."""
    conn = Connection("127.0.0.1", server.port, timeout=TIMEOUT_S)
    try:
        assert conn.exchange("GET", "/", b"", {}) == (200, b"{}")
        between()
        assert conn.exchange("GET", "/", b"", {}) == (200, b"{}")
        assert server.connections == 2
    finally:
        conn.close()
        server.close()


def test_bytes_after_an_answer_are_not_taken_for_the_next_one() -> None:
    two_good_answers_on_two_connections(HostileServer(reply(
        b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n{}HTTP/1.1 200 OK\r\ncontent-length: 6\r\n\r\nforged")))


def test_bytes_arriving_after_an_answer_was_read_are_not_taken_for_the_next_one() -> None:
    answered, forged = threading.Event(), threading.Event()

    def late(conn: socket.socket) -> None:
        conn.sendall(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n{}")
        answered.wait(TIMEOUT_S)  # the client has read its answer and not asked again yet
        conn.sendall(b"HTTP/1.1 200 OK\r\ncontent-length: 6\r\n\r\nforged")
        forged.set()

    def forge_now() -> None:
        answered.set()
        assert forged.wait(TIMEOUT_S)

    two_good_answers_on_two_connections(HostileServer(late), forge_now)


def test_interim_answers_are_skipped_and_bodiless_statuses_read_no_body() -> None:
    port, _ = serve([
        b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nlink: </a>\r\n\r\n"
        b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n{}",
        b"HTTP/1.1 204 No Content\r\ncontent-length: 7\r\n\r\n",
        b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n{}",
    ])
    conn = Connection("127.0.0.1", port, timeout=5)
    assert conn.exchange("GET", "/", b"", {}) == (200, b"{}")
    assert conn.exchange("GET", "/", b"", {}) == (204, b"")
    assert conn.exchange("GET", "/", b"", {}) == (200, b"{}")  # the 204 left the stream in step
    conn.close()


def test_an_http_1_0_answer_is_not_kept_alive() -> None:
    answer = b"HTTP/1.0 200 OK\r\ncontent-length: 2\r\n\r\n{}"
    two_good_answers_on_two_connections(HostileServer(reply(answer)))


@pytest.mark.parametrize("reply", [
    pytest.param(OK + b"content-length: 2\r\ntransfer-encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n",
                 id="both a length and a coding"),
    pytest.param(OK + b"content-length : 2\r\n\r\n{}", id="space before the colon"),
    pytest.param(OK + b"x-a: b\r\n continued\r\ncontent-length: 2\r\n\r\n{}", id="folded field"),
    pytest.param(OK + b"content-length: 0000000000002\r\n\r\n{}", id="length of 13 digits"),
    pytest.param(OK + b"content-length: \xb2\r\n\r\n{}", id="a superscript two, a digit to str.isdigit"),
    pytest.param(b"HTTP/1.1 101 Switching Protocols\r\n\r\n", id="protocol switch"),
])
def test_framing_a_parser_could_read_two_ways_is_a_protocol_error(reply: bytes) -> None:
    with pytest.raises(ProtocolError):
        answer_with(reply).exchange("GET", "/", b"", {})


def test_the_host_field_carries_an_international_name_in_its_ascii_form() -> None:
    assert _host_field("bücher.example", 8080) == "xn--bcher-kva.example:8080"


def test_meanwhile_runs_once_the_request_has_left_and_before_the_answer_is_read() -> None:
    """A send keeps its in-flight copy while the relay stores the message: the server here holds
    its answer until that work has run, and the work waits until the server has the request."""
    listener = socket.create_server(("127.0.0.1", 0))
    got, ran = threading.Event(), threading.Event()

    def run() -> None:
        conn, _ = listener.accept()
        listener.close()
        with conn:
            read_request(conn)
            got.set()
            if ran.wait(10):
                conn.sendall(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n{}")

    threading.Thread(target=run, daemon=True).start()
    order: list[str] = []

    def meanwhile() -> None:
        order.append("request taken" if got.wait(10) else "request not taken")
        ran.set()

    conn = Connection("127.0.0.1", listener.getsockname()[1], timeout=5)
    assert conn.exchange("POST", "/m", b"blob", {}, meanwhile) == (200, b"{}")
    assert order == ["request taken"]
    conn.close()
