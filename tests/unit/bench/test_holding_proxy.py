"""bench/holding_proxy.py, the late mail of bench/ratchet_soak.py, against a real relay: a held
deposit is answered as stored, reaches the relay only when released, and everything else (the
invite, the receive) passes through untouched."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Agent, RelayProcess, befriend
from tests.unit.bench.scripts import load_bench


@pytest.fixture
def proxy(relay: RelayProcess) -> Iterator[Any]:
    proxy = load_bench("holding_proxy").HoldingProxy(relay.port)
    yield proxy
    proxy.close()


def test_a_held_deposit_is_answered_as_stored_and_arrives_only_when_released(
        tmp_path: Path, proxy: Any) -> None:
    alice, bob = (Agent(tmp_path / f"home-{name}", proxy.url) for name in ("alice", "bob"))
    for agent, name in ((alice, "alice"), (bob, "bob")):
        agent.ok("init", name, "--no-passphrase")
    befriend(alice, bob)
    sender = Agent(alice.home, proxy.send_url)
    bob_fp = bob.ok("id", "--json").json()["fingerprint"]

    proxy.hold_next(bob_fp)
    held = sender.ok("send", "bob", "late", "--json").json()
    assert held["state"] == "stored"  # the sender saw the relay's answer
    on_time = sender.ok("send", "bob", "on time", "--json").json()  # one hold: the next passes
    assert [m["text"] for m in bob.ok("receive").lines()] == ["on time"]

    [kept] = proxy.held
    proxy.release(kept)
    late = bob.ok("receive").lines()
    assert [(m["id"], m["text"]) for m in late] == [(held["id"], "late")]
    assert on_time["id"] != held["id"] and proxy.held == []
