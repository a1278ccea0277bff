"""A sender's folder restored from a backup, over a real relay: its count of numbers and its Olm
sessions roll back, and the receiver refuses what reuses them; every message still reaches the
receiver exactly once. And refusals that sending again can cure, up to the bound."""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from follower.receive.receipts import deposit, seal_receipts
from follower.relay.client import RelayClient
from follower.send.outbox import Entry, Outbox
from follower.send.resending import MAX_SENDS, Way
from keys import keystore
from keys.contacts import ContactBook
from keys.identity import Identity
from keys.ratchet.inflight import INFLIGHT_FILE
from tests.conftest import Agent, wait_for
from tests.e2e.probes import spool_ids

ROUNDS = 6  # receive on both sides: each round settles one more step of every message

# `talk receive`, killed (SIGKILL) at a point of sending a refused message again: before the
# first copy is sealed (the refusals recorded, the count moved, the session forgotten), once it
# is sealed but not recorded in the outbox, or once recorded but not deposited.
KILLED_IN_A_RESEND = """
import os, signal, sys
import follower.receive.recovery, follower.send.outbound
from follower.send.outbox import Outbox
from talk.__main__ import main

def die(*args, **kwargs):
    os.kill(os.getpid(), signal.SIGKILL)

point = sys.argv[1]
if point == "before sealing":
    follower.receive.recovery.send_again = die
elif point == "sealed":
    Outbox.recovered = die
else:
    follower.send.outbound._deposit_recorded = die
sys.argv = ["talk", "receive"]
main()
"""


def sent(agent: Agent, to: str, text: str) -> str:
    msg_id: str = agent.ok("send", to, text, "--json").json()["id"]
    return msg_id


def received(agent: Agent) -> list[str]:
    return [m["id"] for m in agent.ok("receive").lines() if m["kind"] == "chat"]


def outbox(agent: Agent, name: str) -> dict[str, Entry]:
    return Outbox(agent.home / name).entries()


def restore(agent: Agent, backup: Path) -> None:
    """Put the copy back, as a person restoring a home folder from a backup would."""
    shutil.rmtree(agent.home)
    shutil.copytree(backup, agent.home, symlinks=True)


def unlocked(agent: Agent, name: str) -> Identity:
    pfile = agent.passphrase_file
    return keystore.unlock(keystore.load(agent.home / name),
                           keystore.read_passphrase_file(str(pfile)) if pfile else None)


def test_a_restored_backup_loses_no_message_and_delivers_each_once(
        pair: tuple[Agent, Agent], tmp_path: Path) -> None:
    alice, bob = pair
    backup = tmp_path / "backup"
    shutil.copytree(alice.home, backup, symlinks=True)  # with the session the invite began
    before = [sent(alice, "bob", f"before {n}") for n in range(20)]
    taken = received(bob)
    assert sorted(taken) == sorted(before)
    restore(alice, backup)
    after = [sent(alice, "bob", f"after {n}") for n in range(20)]
    for _ in range(ROUNDS):
        taken += received(bob)
        alice.ok("receive")
        if all(e.state == "delivered" for i, e in outbox(alice, "alice").items() if i in after):
            break
    assert Counter(taken) == Counter(before + after)  # every message, each exactly once
    entries = outbox(alice, "alice")
    assert {entries[i].state for i in after} == {"delivered"}
    assert all(1 < entries[i].sends <= MAX_SENDS for i in after)  # each came back and went again
    assert Way.RENUMBERED in {entries[i].way for i in after}
    # Bob's quarantine keeps each refusal, marked recovered: none is counted as lost.
    assert bob.ok("status", "--json").json()["quarantined"] == 0
    assert "refused" not in alice.ok("outbox").out
    kept = (alice.home / "alice" / INFLIGHT_FILE).read_bytes()
    assert not [i for i in after if i.encode() in kept]  # settled: what they said is erased
    later = sent(alice, "bob", "after the restore settled")  # the count is past bob's: no refusal
    assert received(bob) == [later]


def test_a_restore_while_the_receivers_follower_runs_loses_nothing(
        pair: tuple[Agent, Agent], tmp_path: Path) -> None:
    alice, bob = pair
    backup = tmp_path / "backup"
    shutil.copytree(alice.home, backup, symlinks=True)
    bob.ok("follow", "--peer", "alice")
    try:
        before = [sent(alice, "bob", f"before {n}") for n in range(20)]
        wait_for(lambda: all(spool_ids(bob, "bob")[i] == 1 for i in before), 30, "the first 20")
        restore(alice, backup)
        after = [sent(alice, "bob", f"after {n}") for n in range(20)]

        def settled() -> bool:
            alice.ok("receive")  # alice takes bob's refusals and sends again
            entries = outbox(alice, "alice")
            return all(entries[i].state == "spooled" for i in after)

        wait_for(settled, 60, "every message sent after the restore to reach bob's spool", step=0.2)
        spooled = spool_ids(bob, "bob")
        assert {i: spooled[i] for i in before + after} == dict.fromkeys(before + after, 1)
        assert bob.ok("status", "--json").json()["quarantined"] == 0
    finally:
        bob.run("stop")


def refuse(bob: Agent, alice: Agent, msg_id: str, reason: str) -> None:
    """Bob's own receipt refusing alice's message `msg_id` for `reason`, sent over the relay as
    his receiver would (a refusal the receiver side gives on its own terms elsewhere)."""
    me = unlocked(bob, "bob")
    [to_alice] = ContactBook(bob.home / "bob").all()
    with RelayClient(bob.relay_url) as client:
        items = [{"ref": msg_id, "state": "refused", "reason": reason}]
        assert deposit(client, seal_receipts(me, to_alice, items)) == 0


def test_refusals_send_a_message_again_until_the_bound_then_it_is_final_and_bob_has_it_once(
        pair: tuple[Agent, Agent]) -> None:
    alice, bob = pair
    msg = sent(alice, "bob", "refused again and again")
    ways = []
    for reason in ("not opened: in none of the sessions held", "not opened: in none of the sessions held",
                   "no session: no ratchet session with this peer opens the message"):
        refuse(bob, alice, msg, reason)
        alice.ok("receive")
        entry = outbox(alice, "alice")[msg]
        assert entry.state == "stored"  # on its way again
        assert msg.encode() in (alice.home / "alice" / INFLIGHT_FILE).read_bytes()  # kept: it may go again
        ways.append(entry.way)
    # Unopened: the same session, then (that copy unopened too) a new one; no session: a new one.
    assert ways == [Way.SAME_SESSION, Way.NEW_SESSION, Way.NEW_SESSION]
    assert outbox(alice, "alice")[msg].sends == MAX_SENDS
    refuse(bob, alice, msg, "not opened: in none of the sessions held")
    alice.ok("receive")
    entry = outbox(alice, "alice")[msg]
    assert (entry.state, entry.reason) == ("refused", f"refused after {MAX_SENDS} attempts: not opened: "
                                                      "in none of the sessions held")
    assert msg.encode() not in (alice.home / "alice" / INFLIGHT_FILE).read_bytes()  # final: erased
    assert f"refused after {MAX_SENDS} attempts" in alice.ok("outbox").out
    assert f"refused after {MAX_SENDS} attempts" in alice.ok("status", msg).out
    assert [m["sends"] for m in alice.ok("outbox", "--json").json() if m["id"] == msg] == [MAX_SENDS]
    # Four copies of one id reached the relay; bob's receiver hands it on once.
    assert received(bob) == [msg]
    assert received(bob) == []


@pytest.mark.parametrize("point", ["before sealing", "sealed", "recorded"])
def test_a_kill_at_any_point_of_a_resend_neither_loses_a_message_nor_delivers_it_twice(
        pair: tuple[Agent, Agent], tmp_path: Path, point: str) -> None:
    alice, bob = pair
    backup = tmp_path / "backup"
    shutil.copytree(alice.home, backup, symlinks=True)
    before = [sent(alice, "bob", f"before {n}") for n in range(5)]
    taken = received(bob)
    restore(alice, backup)
    after = [sent(alice, "bob", f"after {n}") for n in range(5)]
    taken += received(bob)  # refused: none of them is handed on
    child = subprocess.run([sys.executable, "-c", KILLED_IN_A_RESEND, point], env=alice.env(),
                           capture_output=True, text=True, timeout=120)
    assert child.returncode == -signal.SIGKILL, child.stderr
    for _ in range(ROUNDS):
        alice.ok("receive")
        taken += received(bob)
        if all(e.state == "delivered" for i, e in outbox(alice, "alice").items() if i in after):
            break
    assert Counter(taken) == Counter(before + after)
    entries = outbox(alice, "alice")
    assert {entries[i].state for i in after} == {"delivered"}
