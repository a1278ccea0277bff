"""A fair mailbox: one contact writing while the owner is away fills only its own share.

Real relays (on SQLite, and on Redis as several replicas would run), real `talk` processes:
the loud contact's excess waits in its outbox (507, naming the per-sender share), another
contact's message is still stored, and the owner's next receive takes both.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import befriend, make_agent
from tests.e2e.relay_calls import relay_on

SHARE = 3
LIMITS = ["--max-mailbox", "20", "--max-per-tag", str(SHARE)]


@pytest.mark.parametrize("kind", ["sqlite", "redis"])
def test_one_contact_fills_only_its_share_while_the_owner_is_away(tmp_path: Path, kind: str) -> None:
    with relay_on(kind, tmp_path, *LIMITS) as relay:
        bob = make_agent(tmp_path, relay, "bob", None)
        alice = make_agent(tmp_path, relay, "alice", None)
        carol = make_agent(tmp_path, relay, "carol", None)
        befriend(bob, alice)
        befriend(bob, carol)
        bob.ok("receive")  # bob reads both channels now (registers them), then goes away

        results = [alice.run("send", "bob", f"loud {i}", "--json") for i in range(SHARE + 2)]
        assert all(r.code == 0 for r in results), [r.err for r in results]
        states = [r.json()["state"] for r in results]
        assert states == ["stored"] * SHARE + ["queued"] * 2
        assert f"at most {SHARE} messages" in results[-1].err and "per sender" in results[-1].err

        quiet = carol.ok("send", "bob", "quiet one", "--json").json()
        assert quiet["state"] == "stored"  # alice's flood left room for carol

        texts = [str(m.get("text")) for m in bob.ok("receive").lines()]
        assert sorted(texts) == sorted([f"loud {i}" for i in range(SHARE)] + ["quiet one"])
        # Once bob has read, alice's queued mail goes with her next send.
        alice.ok("send", "bob", "after", "--json")
        texts = [str(m.get("text")) for m in bob.ok("receive").lines()]
        assert sorted(texts) == sorted(["loud 3", "loud 4", "after"])
