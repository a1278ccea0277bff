"""follower.daemon.keyagent: what the follower answers, to whom, over a real Unix socket."""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from follower.daemon.keyagent import SOCKET_FILE, Held, KeyAgent, answer, ask, peer_is_owner
from keys.encoding import b64e

KEY = bytes(range(32))


def opens_only(key: bytes) -> bool:
    return key == KEY


def test_the_key_is_served_only_between_unlock_and_lock() -> None:
    held = Held()
    assert answer({"op": "key"}, held, opens_only) == {"locked": True}
    assert answer({"op": "unlock", "key": b64e(KEY)}, held, opens_only) == {"ok": True}
    assert answer({"op": "key"}, held, opens_only) == {"key": b64e(KEY)}
    assert answer({"op": "lock"}, held, opens_only) == {"ok": True, "was": True}
    assert answer({"op": "key"}, held, opens_only) == {"locked": True}
    assert answer({"op": "lock"}, held, opens_only) == {"ok": True, "was": False}


@pytest.mark.parametrize(
    "request_",
    [
        {"op": "unlock", "key": b64e(bytes(32))},  # opens nothing
        {"op": "unlock", "key": b64e(KEY[:16])},  # not a key
        {"op": "unlock", "key": 7},
        {"op": "unlock"},
        {"op": "forget everything"},
        ["op", "key"],
        None,
    ],
)
def test_a_bad_request_holds_nothing_and_says_why(request_: object) -> None:
    held = Held()
    assert "error" in answer(request_, held, opens_only)
    assert held.get() is None


def test_forgetting_overwrites_the_held_key() -> None:
    held = Held()
    held.set(KEY)
    kept = held._key
    assert held.forget() and kept == bytearray(32) and held.get() is None


def test_the_peer_check_reads_the_uid_from_the_kernel() -> None:
    a, b = socket.socketpair(socket.AF_UNIX)
    with a, b:
        assert peer_is_owner(a)
        assert peer_is_owner(a, os.getuid())
        assert not peer_is_owner(a, os.getuid() + 1)


@pytest.fixture
def agent(tmp_path: Path) -> Iterator[KeyAgent]:
    served = KeyAgent(tmp_path, opens_only, lambda line: None)
    served.start()
    yield served
    served.close()


def test_a_command_gets_the_key_the_follower_was_handed(agent: KeyAgent, tmp_path: Path) -> None:
    assert (tmp_path / SOCKET_FILE).stat().st_mode & 0o777 == 0o600
    assert ask(tmp_path, {"op": "key"}) == {"locked": True}
    assert ask(tmp_path, {"op": "unlock", "key": b64e(KEY)}) == {"ok": True}
    assert ask(tmp_path, {"op": "key"}) == {"key": b64e(KEY)}
    assert ask(tmp_path, {"op": "lock"}) == {"ok": True, "was": True}


def test_closing_forgets_the_key_and_removes_the_socket(agent: KeyAgent, tmp_path: Path) -> None:
    ask(tmp_path, {"op": "unlock", "key": b64e(KEY)})
    agent.close()
    assert agent.held.get() is None and not (tmp_path / SOCKET_FILE).exists()
    assert ask(tmp_path, {"op": "key"}) is None


def test_no_follower_or_a_stale_socket_is_no_answer(tmp_path: Path) -> None:
    assert ask(tmp_path, {"op": "key"}) is None
    dead = socket.socket(socket.AF_UNIX)
    dead.bind(str(tmp_path / SOCKET_FILE))
    dead.close()  # a follower killed with its socket left behind
    assert ask(tmp_path, {"op": "key"}) is None


def test_a_process_of_another_user_is_refused_before_anything_is_read(tmp_path: Path) -> None:
    logged: list[str] = []
    served = KeyAgent(tmp_path, opens_only, logged.append, owner=os.getuid() + 1)
    served.held.set(KEY)
    served.start()
    try:
        assert ask(tmp_path, {"op": "key"}) is None
    finally:
        served.close()
    assert logged == ["key agent: refused a connection from another user"]


def test_a_folder_path_too_long_for_a_socket_address_still_works(tmp_path: Path) -> None:
    deep = tmp_path / ("d" * 60) / ("e" * 60)
    deep.mkdir(parents=True)
    served = KeyAgent(deep, opens_only, lambda line: None)
    served.start()
    try:
        assert (deep / SOCKET_FILE).exists()
        assert ask(deep, {"op": "unlock", "key": b64e(KEY)}) == {"ok": True}
    finally:
        served.close()
