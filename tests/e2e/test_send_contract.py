"""`talk send` tells the truth about what it did, and a caller's retry never makes two copies.

The contract: if the relay does not take a message now (unreachable, busy, full), the message is
queued in the outbox and `talk send` exits 0 with `"state": "queued"` and its id, saying on
stderr not to send it again; the follower, or the next `talk send` or `talk receive`, deposits
it with the same id. If the relay refuses it for good (no such mailbox), nothing stays queued:
the command fails and the outbox marks it dropped.
"""

from __future__ import annotations

import json
import signal
import subprocess

import pytest

from tests.conftest import TALK, Agent, RelayProcess, wait_for


def caller(agent: Agent, *args: str) -> list[str]:
    """What an agent does: send, and send again only if the exit status says it failed."""
    first = agent.run("send", *args, "--json")
    ids = [first.json()["id"]] if first.code == 0 else []
    if first.code != 0:
        again = agent.ok("send", *args, "--json")
        ids.append(again.json()["id"])
    return ids


@pytest.mark.own_relay
def test_relay_down_send_queues_and_a_retrying_caller_delivers_once(
    pair: tuple[Agent, Agent], relay: RelayProcess
) -> None:
    alice, bob = pair
    relay.stop()
    r = alice.run("send", "bob", "while the relay is down", "--json")
    assert r.code == 0, r.err
    queued = r.json()
    assert queued["state"] == "queued" and len(queued["id"]) == 32
    assert "queued" in r.err and "do not send it again" in r.err and "Traceback" not in r.err
    relay.start()
    assert caller(alice, "bob", "after it came back")  # the next send takes the queued one along
    texts = [m["text"] for m in bob.ok("receive").lines()]
    assert texts == ["while the relay is down", "after it came back"]
    assert bob.ok("receive").out == ""
    assert alice.ok("status", queued["id"], "--json").json()["state"] in ("stored", "delivered")


@pytest.mark.own_relay
def test_a_queued_message_goes_with_the_next_receive(pair: tuple[Agent, Agent], relay: RelayProcess) -> None:
    alice, bob = pair
    relay.stop()
    sent = alice.ok("send", "bob", "queued", "--json").json()
    relay.start()
    alice.ok("receive")
    got = bob.ok("receive").lines()
    assert [(m["id"], m["text"]) for m in got] == [(sent["id"], "queued")]


@pytest.mark.own_relay
def test_a_queued_message_goes_with_the_follower(pair: tuple[Agent, Agent], relay: RelayProcess) -> None:
    alice, bob = pair
    relay.stop()
    sent = alice.ok("send", "bob", "for the follower", "--json").json()
    relay.start()
    alice.ok("follow", "--peer", "bob")
    try:
        got: list[dict[str, str]] = []
        def received() -> bool:
            got.extend(bob.ok("receive").lines())
            return bool(got)

        wait_for(received, 20, "the queued message")
        assert [m["id"] for m in got] == [sent["id"]]
    finally:
        alice.run("stop")


@pytest.mark.own_relay
def test_a_final_refusal_leaves_nothing_queued(pair: tuple[Agent, Agent], relay: RelayProcess) -> None:
    alice, _ = pair
    relay.stop()
    relay.db.unlink()  # a relay that lost every mailbox: bob's is unknown now, for good
    relay.start()
    r = alice.run("send", "bob", "nobody home", "--json")
    assert r.code == 1 and "no mailbox" in r.err and "Traceback" not in r.err
    [entry] = alice.ok("outbox", "--json").json()
    assert entry["state"] == "dropped"
    assert not (alice.home / "alice" / "outbox.queued").exists()


def test_ctrl_c_while_waiting_prints_the_id(pair: tuple[Agent, Agent]) -> None:
    alice, _ = pair
    proc = subprocess.Popen([TALK, "send", "bob", "wait for it", "--wait", "delivered", "--timeout", "60",
                             "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            stdin=subprocess.DEVNULL, env=alice.env(), text=True)
    try:
        # Once the relay has it (stored), the process is waiting for the receipt.
        def stored() -> bool:
            rows = alice.ok("outbox", "--json").json()
            return bool(rows) and rows[0]["state"] == "stored"

        wait_for(stored, 15, "the message stored")
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=15)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    [line] = out.splitlines()
    report = json.loads(line)
    assert report["id"] == alice.ok("outbox", "--json").json()[0]["id"]
    assert "Traceback" not in err


@pytest.mark.own_relay
def test_a_wait_cut_short_by_the_relay_still_names_the_sent_message(
    pair: tuple[Agent, Agent], relay: RelayProcess
) -> None:
    alice, bob = pair
    proc = subprocess.Popen([TALK, "send", "bob", "sent, then the relay died", "--wait", "delivered",
                             "--timeout", "60", "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            stdin=subprocess.DEVNULL, env=alice.env(), text=True)
    try:
        wait_for(lambda: any(r["state"] == "stored" for r in alice.ok("outbox", "--json").json()), 15,
                 "the message stored")
        relay.stop()
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 4, err
    sent = json.loads(out)
    assert "do not send it again" in err and sent["id"] in err and "Traceback" not in err
    relay.start()
    assert [m["id"] for m in bob.ok("receive").lines()] == [sent["id"]]
