"""follower.relay.stream: the push stream read on its caller's thread, against a real WebSocket
server on loopback (websockets' own) and raw sockets for what no well-behaved server sends."""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest
from websockets.exceptions import InvalidStatus
from websockets.frames import Frame, Opcode
from websockets.server import ServerProtocol
from websockets.sync.server import ServerConnection, serve

from follower.relay.stream import Stream, StreamClosed

WAIT_S = 30.0  # a bound on waiting for a condition, never a measured time


@contextmanager
def server(handler: Callable[[ServerConnection], None], **options: object) -> Iterator[str]:
    with serve(handler, "127.0.0.1", 0, max_size=2**20, **options) as ws_server:  # type: ignore[arg-type]
        threading.Thread(target=ws_server.serve_forever, daemon=True).start()
        yield f"ws://127.0.0.1:{ws_server.socket.getsockname()[1]}/v1/mail/ab/stream"
        ws_server.shutdown()


def open_stream(url: str, **options: float) -> Stream:
    return Stream.open(url, {"X-Talk-Test": "yes"}, WAIT_S, 16 * 1024, **options)


def test_messages_arrive_in_order_whole_and_as_bytes() -> None:
    seen_header: list[str | None] = []

    def handler(ws: ServerConnection) -> None:
        seen_header.append(ws.request.headers.get("X-Talk-Test") if ws.request else None)
        ws.send('{"type": "ready"}')
        ws.send(b"\x00binary")
        ws.send(iter(["frag", "mented"]))  # one message in three frames
        ws.recv(timeout=WAIT_S)

    with server(handler) as url, open_stream(url) as stream:
        got = stream.messages()
        assert [next(got), next(got), next(got)] == [b'{"type": "ready"}', b"\x00binary", b"fragmented"]
    assert seen_header == ["yes"]


def test_a_message_over_the_cap_closes_with_1009_and_ends_the_stream() -> None:
    closes: list[int | None] = []

    def handler(ws: ServerConnection) -> None:
        ws.send("x" * (64 * 1024))
        with contextlib.suppress(Exception):  # the client hangs up, as it should
            ws.recv(timeout=WAIT_S)
        closes.append(ws.close_code)

    with server(handler) as url, open_stream(url) as stream, \
            pytest.raises(StreamClosed, match="exceeds limit of 16384 bytes"):
        for _ in stream.messages():
            pass
    _wait_for(lambda: bool(closes))
    assert closes == [1009]


def test_pings_are_answered_and_a_relay_that_closes_ends_the_stream() -> None:
    answered: list[bool] = []

    def handler(ws: ServerConnection) -> None:
        answered.append(ws.ping().wait(WAIT_S))
        ws.send("after the ping")
        ws.close(1001)

    with server(handler) as url, open_stream(url) as stream:
        got = stream.messages()
        assert next(got) == b"after the ping"
        with pytest.raises(StreamClosed, match="1001"):
            next(got)
    assert answered == [True]


def test_a_quiet_relay_is_pinged_and_one_that_answers_stays() -> None:
    def handler(ws: ServerConnection) -> None:
        with contextlib.suppress(Exception):  # the client hangs up at the end
            ws.recv(timeout=WAIT_S)  # says nothing; websockets answers the client's pings

    pings: list[int] = []
    with server(handler) as url, open_stream(url, ping_interval=0.05, ping_timeout=WAIT_S) as stream:
        original = stream._protocol.send_ping

        def counted(data: bytes | bytearray | memoryview) -> None:
            pings.append(1)
            if len(pings) == 3:
                stream.close()  # a ping goes out only once the last was answered: enough
            original(data)

        stream._protocol.send_ping = counted  # type: ignore[method-assign]
        with pytest.raises(StreamClosed, match="end of stream"):
            for _ in stream.messages():
                pass
    assert len(pings) == 3


def test_a_relay_that_never_answers_a_ping_is_taken_for_gone() -> None:
    def silent(conn: socket.socket, _: ServerProtocol) -> None:
        _read_until_closed(conn)  # reads the pings, answers none

    with raw_server(silent) as url, open_stream(url, ping_interval=0.05, ping_timeout=0.05) as stream, \
            pytest.raises(StreamClosed, match="did not answer a ping"):
        for _ in stream.messages():
            pass


def test_a_malformed_frame_closes_with_1002() -> None:
    got: list[Frame] = []

    def garbage(conn: socket.socket, protocol: ServerProtocol) -> None:
        conn.sendall(b"\x8f\x7f" + b"\xff" * 64)  # a reserved opcode, a bogus length
        conn.settimeout(WAIT_S)
        while not got and (data := conn.recv(65536)):  # then closes, as a server does
            protocol.receive_data(data)
            got.extend(e for e in protocol.events_received() if isinstance(e, Frame))

    with raw_server(garbage) as url, open_stream(url) as stream, pytest.raises(StreamClosed):
        for _ in stream.messages():
            pass
    _wait_for(lambda: bool(got))
    assert got[0].opcode is Opcode.CLOSE and bytes(got[0].data[:2]) == (1002).to_bytes(2, "big")


def test_close_from_another_thread_ends_a_read_under_way() -> None:
    def handler(ws: ServerConnection) -> None:
        ws.recv(timeout=WAIT_S)

    with server(handler) as url, open_stream(url) as stream:
        ended = threading.Event()

        def read() -> None:
            with pytest.raises(StreamClosed):
                for _ in stream.messages():
                    pass
            ended.set()

        reader = threading.Thread(target=read)
        reader.start()
        stream.close()
        reader.join(WAIT_S)
        assert ended.is_set()


def test_a_refused_handshake_is_invalid_status() -> None:
    def refuse(conn: socket.socket, _: ServerProtocol) -> None:
        conn.recv(65536)
        conn.sendall(b"HTTP/1.1 403 Forbidden\r\ncontent-length: 2\r\n\r\n{}")

    with raw_server(refuse, handshake=False) as url, pytest.raises(InvalidStatus) as refused:
        open_stream(url)
    assert refused.value.response.status_code == 403


@contextmanager
def raw_server(after: Callable[[socket.socket, ServerProtocol], None],
               handshake: bool = True) -> Iterator[str]:
    """A TCP server for one connection: it answers the WebSocket handshake (unless not
    `handshake`), then hands the connection and its protocol state to `after`."""
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]

    def serve_one() -> None:
        conn, _ = listener.accept()
        with conn:
            protocol = ServerProtocol()
            if handshake:
                while not (events := protocol.events_received()):
                    protocol.receive_data(conn.recv(65536))
                protocol.send_response(protocol.accept(events[0]))  # type: ignore[arg-type]
                conn.sendall(b"".join(protocol.data_to_send()))
            after(conn, protocol)

    thread = threading.Thread(target=serve_one, daemon=True)
    thread.start()
    try:
        yield f"ws://127.0.0.1:{port}/v1/mail/ab/stream"
    finally:
        listener.close()
        thread.join(WAIT_S)


def _read_until_closed(conn: socket.socket) -> bytes:
    conn.settimeout(WAIT_S)
    data = b""
    with contextlib.suppress(ConnectionResetError):
        while chunk := conn.recv(65536):
            data += chunk
    return data


def _wait_for(condition: Callable[[], bool]) -> None:
    done = threading.Event()
    for _ in range(int(WAIT_S / 0.01)):
        if condition():
            return
        done.wait(0.01)
    raise AssertionError("condition not met in time")

