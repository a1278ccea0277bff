"""The relay's HTTP contract and the mail flow on `talk relay --store redis://...`.

The route contract runs on Redis too (test_relay_api's ON_EITHER_STORE tests); here is the
whole send/receive path between two identities on a real Redis server, and the store flags.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import TALK, befriend, free_port, make_agent
from tests.redis_support import StoreRelay, keys_under, redis_prefix, require_redis


@pytest.fixture
def redis_relay(tmp_path: Path) -> Iterator[StoreRelay]:
    with redis_prefix() as prefix:
        relay = StoreRelay(tmp_path / "unused.db", free_port(), store=f"{require_redis()}?prefix={prefix}")
        yield relay.start()
        relay.stop()


def test_send_and_receive_through_redis(tmp_path: Path, redis_relay: StoreRelay) -> None:
    alice = make_agent(tmp_path, redis_relay, "alice", None)
    bob = make_agent(tmp_path, redis_relay, "bob", None)
    befriend(alice, bob)
    sent = alice.ok("send", "bob", "over redis", "--json").json()["id"]
    got = bob.ok("receive").lines()
    assert [(m["id"], m["text"]) for m in got] == [(sent, "over redis")]
    assert bob.ok("receive").lines() == []  # acked: gone from the store
    assert alice.ok("receive").lines() == []  # bob's receipt: taken into her outbox, not printed
    assert alice.ok("status", sent, "--json").json()["state"] == "delivered"
    prefix = redis_relay.store.partition("?prefix=")[2]
    assert not [k for k in keys_under(prefix) if k.startswith(f"{prefix}blob:".encode())]


def test_store_and_db_together_are_refused(tmp_path: Path) -> None:
    p = subprocess.run(
        [TALK, "relay", "--port", str(free_port()), "--db", str(tmp_path / "never.db"),
         "--store", "redis://127.0.0.1:6379/0"],
        capture_output=True, text=True, timeout=30,
    )
    assert p.returncode != 0 and "not both" in p.stderr
    assert not (tmp_path / "never.db").exists()


def test_unknown_store_is_refused(tmp_path: Path) -> None:
    p = subprocess.run(
        [TALK, "relay", "--port", str(free_port()), "--store", "postgres://localhost/x"],
        capture_output=True, text=True, timeout=30,
        env={**os.environ, "TALK_HOME": str(tmp_path / "talk")},
    )
    assert p.returncode != 0 and "sqlite:PATH or redis://" in p.stderr
