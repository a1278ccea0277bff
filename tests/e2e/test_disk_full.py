"""A full disk under a running follower: it stops acking, says why in `talk status`, and resumes by
itself once there is room, having lost nothing and written nothing twice.

The disk is a real one: a small tmpfs mounted for the test (the tests run as root here; elsewhere
this test skips, since only root may mount).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Agent, RelayProcess, befriend, make_agent, wait_for
from tests.e2e.conftest import fill
from tests.e2e.probes import relay_mail_count, spool_ids


def follower_status(agent: Agent) -> dict[str, Any]:
    return dict(agent.ok("status", "--json").json()["follower"])


@pytest.mark.own_relay
def test_a_full_disk_pauses_the_follower_and_it_resumes_alone(
    tmp_path: Path, relay: RelayProcess, small_disk: Path
) -> None:
    alice = make_agent(tmp_path, relay, "alice", None)
    bob = Agent(small_disk / "home-bob", relay.url)
    bob.ok("init", "bob", "--no-passphrase")
    befriend(alice, bob)
    bob.ok("follow", "--peer", "alice")
    try:
        first = alice.ok("send", "bob", "before", "--json").json()["id"]
        wait_for(lambda: spool_ids(bob, "bob")[first] == 1, 15, "the first message")
        filler = fill(small_disk)
        sent = [alice.ok("send", "bob", f"during {i}", "--json").json()["id"] for i in range(3)]

        def says_disk_full() -> bool:
            st = follower_status(bob)
            return bool(st["running"]) and "space" in str(st.get("last_error") or "").lower()

        wait_for(says_disk_full, 30, "talk status to show the full disk")
        assert relay_mail_count(relay, bob) >= 1  # nothing it could not write was acked
        filler.unlink()
        wait_for(lambda: all(spool_ids(bob, "bob")[m] == 1 for m in sent), 60, "delivery after room")
        wait_for(lambda: relay_mail_count(relay, bob) == 0, 30, "every message acked")
        ids = spool_ids(bob, "bob")
        assert all(ids[m] == 1 for m in [first, *sent]) and sum(ids.values()) == 4
        assert follower_status(bob)["running"]
        folder = bob.home / "bob"
        assert list(folder.glob(".*.tmp")) == [] and list((folder / "spool").glob(".*.tmp")) == []
    finally:
        bob.run("stop")
