"""Two relay replicas on one Redis: mail deposited through A wakes a follower on B's stream,
and killing A mid-flow loses nothing (alice retries through B)."""

from __future__ import annotations

import signal
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import Agent, befriend, free_port, make_agent, wait_for
from tests.e2e.probes import spool_ids, status
from tests.redis_support import StoreRelay, redis_prefix, require_redis


@pytest.fixture
def replicas(tmp_path: Path) -> Iterator[tuple[StoreRelay, StoreRelay]]:
    with redis_prefix() as prefix:
        store = f"{require_redis()}?prefix={prefix}"
        a = StoreRelay(tmp_path / "a.db", free_port(), store=store).start()
        b = StoreRelay(tmp_path / "b.db", free_port(), store=store).start()
        yield a, b
        a.stop()
        b.stop()


def pushing(agent: Agent) -> bool:
    follower = status(agent, "bob")["follower"]
    return isinstance(follower, dict) and follower.get("push") == "connected"


@pytest.fixture
def split_pair(
    tmp_path: Path, replicas: tuple[StoreRelay, StoreRelay]
) -> Iterator[tuple[Agent, Agent]]:
    """alice talks to replica A, bob to replica B; bob follows alice on B's stream."""
    a, b = replicas
    alice, bob = make_agent(tmp_path, a, "alice", None), make_agent(tmp_path, b, "bob", None)
    befriend(alice, bob)
    bob.ok("follow", "--peer", "alice", "--json")
    wait_for(lambda: pushing(bob), 10, "bob's stream on replica B")
    yield alice, bob
    bob.run("stop")


def test_deposit_on_a_wakes_the_follower_on_b_at_once(split_pair: tuple[Agent, Agent]) -> None:
    alice, bob = split_pair
    for i in range(3):
        sent = alice.ok("send", "bob", f"via A {i}", "--json").json()["id"]
        start = time.monotonic()
        wait_for(lambda: sent in spool_ids(bob, "bob"), 1.0, "bob to spool it within 1 s")  # noqa: B023
        assert time.monotonic() - start < 1.0


def send_retrying(alice: Agent, fallback: str, text: str) -> str:
    """As an agent behind a load balancer: a send the relay did not take is queued (exit 0,
    never sent again by hand); the balancer then points alice at B, and her next send takes
    the queued message along."""
    r = alice.run("send", "bob", text, "--json")
    assert r.code == 0, r.err
    if r.json()["state"] == "queued":  # replica A is gone
        alice.relay_url = fallback
    return str(r.json()["id"])


def test_killing_replica_a_mid_flow_loses_nothing(
    split_pair: tuple[Agent, Agent], replicas: tuple[StoreRelay, StoreRelay]
) -> None:
    alice, bob = split_pair
    a, b = replicas
    sent = []
    for i in range(30):
        if i == 12:
            a.stop(signal.SIGKILL)
        sent.append(send_retrying(alice, b.url, f"note {i}"))
    assert alice.relay_url == b.url  # the kill really happened mid-flow
    alice.ok("receive")  # whatever is still queued goes now (a follower would do the same)
    wait_for(lambda: set(sent) <= set(spool_ids(bob, "bob")), 10, "all 30 messages spooled")
    spooled = spool_ids(bob, "bob")
    assert set(spooled) == set(sent) and set(spooled.values()) == {1}, spooled
    assert Counter(sent) == spooled
