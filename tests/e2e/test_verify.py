"""`talk verify` records the check; accepting mail because of it needs a person.

Every `talk` here runs with stdin off a terminal, as an agent runs it, except the one test that
answers the prompt on a real pseudo-terminal.
"""

from __future__ import annotations

import json
import os
import pty
import select
import sqlite3
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from follower.policy import Policy, Rule, raised_by_verify
from tests.conftest import TALK, Agent, RelayProcess, make_agent


def fingerprint(agent: Agent) -> str:
    return str(agent.ok("id", "--json").json()["fingerprint"])


def trust_log(agent: Agent, name: str) -> list[dict[str, Any]]:
    path = agent.home / name / "trust.log"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def added_pair(tmp_path: Path, relay: RelayProcess) -> tuple[Agent, Agent]:
    """alice and bob pinned by bare fingerprint: each holds the other's mail."""
    alice = make_agent(tmp_path, relay, "alice", None)
    bob = make_agent(tmp_path, relay, "bob", None)
    alice.ok("add", fingerprint(bob), "--name", "bob")
    bob.ok("add", fingerprint(alice), "--name", "alice")
    assert bob.ok("policy", "alice", "--json").json()["policy"] == "hold"
    return alice, bob


def test_verify_off_a_terminal_records_the_check_and_keeps_a_held_contact_held(
    tmp_path: Path, relay: RelayProcess
) -> None:
    alice, bob = added_pair(tmp_path, relay)
    r = bob.run("verify", "alice", "--json")
    assert r.code == 0, r.err
    shown = r.json()
    assert len(shown["safety_number"].split()) == 12
    assert shown["policy"] == "hold" and shown["policy_raised"] is False
    assert shown["verified_at"] is not None
    assert "still hold" in r.err and "talk verify alice --yes" in r.err

    assert bob.ok("policy", "alice", "--json").json()["policy"] == "hold"
    (contact,) = bob.ok("contacts", "--json").json()
    assert contact["verified"] is True
    log = trust_log(bob, "bob")
    assert [e["action"] for e in log] == ["verified"]
    assert log[0]["name"] == "alice" and log[0]["fingerprint"] == fingerprint(alice)

    # And it is still held: the check let nothing through.
    alice.ok("send", "bob", "after a verify without --yes")
    r = bob.ok("receive", "--peer", "alice")
    assert r.out == "" and "held a message from alice" in r.err


def test_verify_with_yes_accepts_and_the_trust_log_says_so(tmp_path: Path, relay: RelayProcess) -> None:
    alice, bob = added_pair(tmp_path, relay)
    shown = bob.ok("verify", "alice", "--yes", "--json").json()
    assert shown["policy"] == "accept" and shown["policy_raised"] is True
    assert bob.ok("policy", "alice", "--json").json()["policy"] == "accept"
    log = trust_log(bob, "bob")
    assert [e["action"] for e in log] == ["verified", "policy"]
    assert log[1]["before"]["policy"] == "hold" and log[1]["after"]["policy"] == "accept"

    alice.ok("send", "bob", "now accepted")
    assert [m["text"] for m in bob.ok("receive", "--peer", "alice").lines()] == ["now accepted"]


def test_verify_never_lifts_a_refusal_nor_logs_a_change_it_did_not_make(
    tmp_path: Path, relay: RelayProcess
) -> None:
    _, bob = added_pair(tmp_path, relay)
    bob.ok("policy", "alice", "refuse", "--yes")
    r = bob.ok("verify", "alice", "--yes", "--json")
    assert r.json()["policy"] == "refuse" and r.json()["policy_raised"] is False
    assert r.err == ""
    assert [e["action"] for e in trust_log(bob, "bob")] == ["policy", "verified"]


def test_verify_of_an_accepted_contact_only_records_the_check(pair: tuple[Agent, Agent]) -> None:
    alice, _ = pair  # made by invite: accepted already
    r = alice.ok("verify", "bob", "--json")
    assert r.json()["policy"] == "accept" and r.json()["policy_raised"] is False
    assert r.err == ""
    assert [e["action"] for e in trust_log(alice, "alice")] == ["verified"]


@pytest.mark.own_relay
def test_a_failed_verify_records_nothing(tmp_path: Path, relay: RelayProcess) -> None:
    alice, bob = added_pair(tmp_path, relay)
    carol = make_agent(tmp_path, relay, "carol", None)
    with sqlite3.connect(relay.db) as db:  # a relay serving carol's keys as alice's
        (carols,) = db.execute("SELECT bundle FROM bundles WHERE fp = ?", (fingerprint(carol),)).fetchone()
        db.execute("UPDATE bundles SET bundle = ? WHERE fp = ?", (carols, fingerprint(alice)))
    r = bob.run("verify", "alice", "--yes")
    assert r.code == 2 and "PIN MISMATCH" in r.err
    assert trust_log(bob, "bob") == []
    assert bob.ok("contacts", "--json").json()[0]["verified"] is False
    assert bob.ok("policy", "alice", "--json").json()["policy"] == "hold"


@pytest.mark.parametrize(("answer", "policy", "logged"), [
    (b"y\n", "accept", ["verified", "policy"]),
    (b"n\n", "hold", ["verified"]),
])
def test_verify_on_a_terminal_asks_before_accepting(
    tmp_path: Path, relay: RelayProcess, answer: bytes, policy: str, logged: list[str]
) -> None:
    _, bob = added_pair(tmp_path, relay)
    out = run_on_terminal(bob, ["verify", "alice"], answer=answer)
    assert "Accept alice's mail from now on" in out
    assert bob.ok("policy", "alice", "--json").json()["policy"] == policy
    assert [e["action"] for e in trust_log(bob, "bob")] == logged


def run_on_terminal(agent: Agent, args: list[str], answer: bytes, timeout: float = 30) -> str:
    """Run `talk` with a pseudo-terminal as stdin; type `answer` once it asks."""
    controller, terminal = pty.openpty()
    proc = subprocess.Popen([TALK, *args], stdin=terminal, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, env=agent.env())
    os.close(terminal)
    assert proc.stdout is not None
    seen = b""
    deadline = time.monotonic() + timeout
    try:
        while b"?" not in seen:
            assert time.monotonic() < deadline, f"no prompt in {timeout} s: {seen!r}"
            ready, _, _ = select.select([proc.stdout], [], [], 0.5)
            if ready:
                chunk = os.read(proc.stdout.fileno(), 4096)
                assert chunk, f"talk exited before asking: {seen!r}"
                seen += chunk
        os.write(controller, answer)
        rest, _ = proc.communicate(timeout=max(1.0, deadline - time.monotonic()))
    finally:
        os.close(controller)
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, (seen + rest).decode()
    return (seen + rest).decode()


def test_only_held_mail_is_raised_by_a_verify() -> None:
    assert raised_by_verify(Rule(Policy.HOLD)) is Policy.ACCEPT
    assert raised_by_verify(Rule(Policy.ACCEPT)) is None
    assert raised_by_verify(Rule(Policy.REFUSE)) is None
