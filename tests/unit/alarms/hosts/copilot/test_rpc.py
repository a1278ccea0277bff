"""alarms.hosts.copilot.rpc: Content-Length framing with limits, and a connection against a socket
standing in for Copilot CLI's server (the real one runs in tests/hosts/test_copilot_run.py)."""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable
from typing import Any

import pytest

from alarms.hosts.copilot.rpc import Connection, Decoder, FramingError, RpcError, encode
from tests.conftest import wait_for


def test_messages_come_out_whole_however_the_bytes_are_cut() -> None:
    wire = encode({"id": 1, "result": {"text": "héllo"}}) + encode({"method": "session.event", "params": {}})
    decoder = Decoder()
    out = [m for i in range(len(wire)) for m in decoder.feed(wire[i:i + 1])]
    assert out == [{"id": 1, "result": {"text": "héllo"}}, {"method": "session.event", "params": {}}]


@pytest.mark.parametrize(("data", "why"), [
    (b"Content-Length: 5\r\n\r\n[1,2]", "not a JSON object"),
    (b"Content-Length: 3\r\n\r\nnop", "not JSON"),
    (b"Content-Type: x\r\n\r\n{}", "without Content-Length"),
    (b"Content-Length: many\r\n\r\n{}", "not a number"),
    (b"Content-Length: 999999\r\n\r\n", "limit"),
    (b"X" * 200, "header longer"),
])
def test_what_is_not_a_framed_object_within_the_limits_is_refused(data: bytes, why: str) -> None:
    with pytest.raises(FramingError, match=why):
        Decoder(max_header=100, max_body=1000).feed(data)


Answer = Callable[[int], list[bytes]]


def serve_once(server: socket.socket, answer: Answer) -> threading.Thread:
    """Read one request, write what `answer` says for its id."""
    def run() -> None:
        decoder, got = Decoder(), list[dict[str, Any]]()
        while not got:
            got = decoder.feed(server.recv(65536))
        for chunk in answer(got[0]["id"]):
            server.sendall(chunk)
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def test_a_call_gets_its_result_notices_go_to_the_handler_and_questions_get_an_error() -> None:
    ours, theirs = socket.socketpair()
    notices: list[dict[str, object]] = []
    question = {"jsonrpc": "2.0", "id": 77, "method": "permission.request", "params": {}}
    notice = {"jsonrpc": "2.0", "method": "session.event", "params": {"event": {"type": "x"}}}
    serve_once(theirs, lambda rid: [encode(question), encode(notice),
                                    encode({"jsonrpc": "2.0", "id": rid, "result": {"sessionId": "s1"}})])
    with Connection(ours, notices.append) as conn:
        assert conn.call("session.getForeground", {}, timeout=10) == {"sessionId": "s1"}
        assert notices == [notice]
        reply = Decoder().feed(theirs.recv(65536))
        assert reply[0]["id"] == 77 and reply[0]["error"]["code"] == -32601
    theirs.close()


def test_an_error_answer_and_a_closed_server_are_rpc_errors() -> None:
    ours, theirs = socket.socketpair()
    serve_once(theirs, lambda rid: [encode({"jsonrpc": "2.0", "id": rid,
                                            "error": {"code": -32603, "message": "nope"}})])
    with Connection(ours) as conn:
        with pytest.raises(RpcError, match=r"refused session\.send: nope"):
            conn.call("session.send", {}, timeout=10)
        theirs.close()
        wait_for(lambda: conn.closed, 10, "the reader to see the end")
        with pytest.raises(RpcError):
            conn.call("session.send", {}, timeout=10)
