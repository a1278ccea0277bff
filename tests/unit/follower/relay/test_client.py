"""RelayClient over a scripted loopback server: which failures it retries and how it names them."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator

import pytest

from durable.errors import RelayError, UserError
from follower.relay.client import MALFORMED, RelayClient
from tests.faults import ScriptedServer, read_request

GOOD = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n{}"


class OneShotServer(ScriptedServer):
    """Answers one request per connection with the next scripted reply, then hangs up without a
    `connection: close`: to the client, a kept-alive connection the relay has since dropped."""

    def __init__(self, replies: list[bytes]) -> None:
        self.replies = replies
        self.requests = 0
        self.lock = threading.Lock()  # connections are served on threads of their own
        super().__init__()

    def serve_one(self, conn: socket.socket, nth: int) -> None:
        with conn:
            if read_request(conn) is None:
                return
            with self.lock:
                if self.requests >= len(self.replies):
                    return
                self.requests += 1
                reply = self.replies[self.requests - 1]
            conn.sendall(reply)


@pytest.fixture
def server(request: pytest.FixtureRequest) -> Iterator[OneShotServer]:
    one = OneShotServer(request.param)
    yield one
    one.close()


@pytest.mark.parametrize("server", [[GOOD, GOOD]], indirect=True)
def test_a_dropped_kept_alive_connection_is_retried_on_a_new_one(server: OneShotServer) -> None:
    with RelayClient(server.url, timeout=5) as client:
        assert client.request("GET", "/v1/a") == {}
        assert client.request("GET", "/v1/b") == {}
    assert server.requests == 2


@pytest.mark.parametrize("server", [
    [b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\nzz\r\n", GOOD],
    [b"HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\n{}", GOOD],
    [b"\x1b[2J not http\r\n\r\n", GOOD],
], indirect=True, ids=["bad chunk size", "cut short", "not http"])
def test_a_malformed_answer_is_one_relay_error_and_not_retried(server: OneShotServer) -> None:
    with RelayClient(server.url, timeout=5) as client, pytest.raises(RelayError) as err:
        client.request("GET", "/v1/a")
    assert err.value.code == MALFORMED
    assert "malformed answer" in err.value.message and "\n" not in err.value.message
    assert "\x1b" not in err.value.message
    assert server.requests == 1


@pytest.mark.parametrize("url", ["http://127.0.0.1:1/a b", "http://127.0.0.1:1/relé", "http://127.0.0.1:1/\x00"])
def test_a_relay_path_no_request_line_can_carry_is_a_user_error(url: str) -> None:
    with pytest.raises(UserError, match="percent-encode"):
        RelayClient(url)


DEEP = b"[" * 20_000 + b"]" * 20_000


@pytest.mark.parametrize("server", [
    [b"HTTP/1.1 200 OK\r\ncontent-length: %d\r\n\r\n" % len(DEEP) + DEEP],
    [b"HTTP/1.1 400 Bad\r\ncontent-length: %d\r\n\r\n" % len(DEEP) + DEEP],
], indirect=True, ids=["ok", "an error"])
def test_an_answer_nested_20000_deep_is_one_relay_error(server: OneShotServer) -> None:
    with RelayClient(server.url, timeout=5) as client, pytest.raises(RelayError) as err:
        client.request("GET", "/v1/a")
    assert len(err.value.message) < 400 and "\n" not in err.value.message


def answer(body: bytes, status: str = "200 OK", kind: str = "application/octet-stream") -> bytes:
    return b"HTTP/1.1 %s\r\ncontent-type: %s\r\ncontent-length: %d\r\n\r\n" % (
        status.encode(), kind.encode(), len(body)) + body


class Owner:
    fingerprint = "ab" * 16

    def sign(self, message: bytes) -> bytes:
        return b"\0" * 64


@pytest.mark.parametrize("server", [[answer(b"x" * (256 * 1024 + 18))]], indirect=True)
def test_a_chunk_longer_than_any_chunk_is_refused(server: OneShotServer) -> None:
    with RelayClient(server.url, timeout=5) as client, pytest.raises(RelayError) as err:
        client.get_chunk(Owner(), "cd" * 16, 0)
    assert err.value.code == MALFORMED and "longer than any chunk" in err.value.message


@pytest.mark.parametrize("server", [[answer(b'{"error":"no_such_chunk","message":"gone"}', "404 Not Found",
                                            "application/json")]], indirect=True)
def test_a_missing_chunk_is_a_relay_error_with_its_code(server: OneShotServer) -> None:
    with RelayClient(server.url, timeout=5) as client, pytest.raises(RelayError) as err:
        client.get_chunk(Owner(), "cd" * 16, 0)
    assert (err.value.status, err.value.code) == (404, "no_such_chunk")


@pytest.mark.parametrize("server", [[answer(b'{"next": -1}', kind="application/json")],
                                    [answer(b'{"next": true}', kind="application/json")],
                                    [answer(b'{"bytes": 3}', kind="application/json")]], indirect=True)
def test_a_progress_answer_out_of_shape_is_malformed(server: OneShotServer) -> None:
    with RelayClient(server.url, timeout=5) as client, pytest.raises(RelayError) as err:
        client.file_next("ab" * 16, "cd" * 16)
    assert err.value.code == MALFORMED


STORED = b'HTTP/1.1 200 OK\r\ncontent-length: 11\r\n\r\n{"id":"m1"}'


@pytest.mark.parametrize("server", [[STORED, STORED]], indirect=True)
def test_a_deposit_sent_again_on_a_new_connection_runs_its_meanwhile_each_time(server: OneShotServer) -> None:
    """The caller's work runs once per request that left (so it must do its work once), and the
    answer is the new connection's."""
    calls: list[int] = []
    with RelayClient(server.url, timeout=5) as client:
        assert client.deposit("a" * 32, "t" * 32, b"one") == "m1"  # on a connection the server then drops
        assert client.deposit("a" * 32, "t" * 32, b"two", lambda: calls.append(server.requests)) == "m1"
    assert len(calls) == 2 and server.requests == 2


def test_a_deposit_whose_request_never_left_runs_no_meanwhile() -> None:
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
    calls: list[str] = []
    with RelayClient(f"http://127.0.0.1:{port}", timeout=5) as client, pytest.raises(RelayError):
        client.deposit("a" * 32, "t" * 32, b"blob", lambda: calls.append("ran"))
    assert calls == []
