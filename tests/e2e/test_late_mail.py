"""Mail held back across many reply exchanges, over a real relay: it opens once, late.

Each turn of a conversation starts a new chain in the Olm session, and vodozemac keeps five;
a message that waited longer (a killed send deposited later, a relay that delays) opens in
the chain the receiver archived when it was dropped (`keys.ratchet.late`)."""

from __future__ import annotations

import sqlite3

import pytest

from follower.relay.client import RelayClient
from follower.send.outbox import Outbox
from keys.encoding import b64d
from keys.ratchet.sessions import SESSIONS_DIR, stored_state
from tests.conftest import Agent, RelayProcess
from tests.e2e.probes import sent, texts

TURNS = 10


def held_back(relay: RelayProcess, agent: Agent, name: str, msg_id: str) -> tuple[str, str, bytes]:
    """Take a sent message's blob off the relay before anyone fetched it: (to, tag, blob)."""
    entry = Outbox(agent.home / name).entries()[msg_id]
    blob = b64d(entry.blob)
    with sqlite3.connect(relay.db) as db:
        assert db.execute("DELETE FROM mail WHERE blob = ?", (blob,)).rowcount == 1
    return entry.to, entry.tag, blob


@pytest.mark.own_relay
def test_a_message_held_back_across_ten_turns_is_delivered_once_and_nothing_is_quarantined(
        pair: tuple[Agent, Agent], relay: RelayProcess) -> None:
    alice, bob = pair
    sent(alice, "alice", "hello", "bob")
    assert texts(bob) == ["hello"]
    sent(bob, "bob", "hello back", "alice")
    assert texts(alice) == ["hello back"]  # a session both ways: alice's next is a session message
    late_id = sent(alice, "alice", "held back on the way", "bob")
    held = held_back(relay, alice, "alice", late_id)
    for n in range(TURNS):
        sent(bob, "bob", f"bob's turn {n}", "alice")
        assert texts(alice) == [f"bob's turn {n}"]
        sent(alice, "alice", f"alice's turn {n}", "bob")
        assert texts(bob) == [f"alice's turn {n}"]
    alice_fp = alice.ok("id", "--json").json()["fingerprint"]
    stored = stored_state(bob.home / "bob" / SESSIONS_DIR / f"{alice_fp}.json")
    assert len(stored["late"]) >= TURNS - 5  # the chain it rides was dropped long ago

    with RelayClient(relay.url) as client:
        client.deposit(*held)
    r = bob.ok("receive")
    assert [(m["id"], m["text"]) for m in r.lines()] == [(late_id, "held back on the way")]
    assert "Traceback" not in r.err
    with RelayClient(relay.url) as client:  # and served again: a duplicate, not a second delivery
        client.deposit(*held)
    assert bob.ok("receive").lines() == []
    assert bob.ok("quarantine", "--json").lines() == []
    sent(alice, "alice", "and the conversation goes on", "bob")
    assert texts(bob) == ["and the conversation goes on"]
