"""The conversation protocol end to end: receipts, outbox, policy, held mail, tasks, hops, rates.

Everything runs over a real relay with real `talk` processes and followers; the "door" that
hands mail to an agent is `alarms.mailbox.SessionMail.take`, the very call the Codex and Claude
hooks make (so the hand-over log it writes is the one the real hosts write).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from alarms.framing import frame
from alarms.mailbox import SessionMail
from follower.relay.client import RelayClient
from follower.send.outbound import send as send_message
from follower.send.outbox import Outbox
from keys import keystore
from keys.contacts import ContactBook
from keys.envelope import receipt_tag
from keys.sodium import PublicKey
from spool_writer.record import SpoolRecord
from tests.conftest import TALK, Agent, RelayProcess, befriend, make_agent, wait_for
from tests.faults import LossyProxy


def folder(agent: Agent, name: str) -> Path:
    return agent.home / name


def spool_records(agent: Agent, name: str) -> list[dict[str, Any]]:
    """Every message line in the agent's spool (inbox and session copies)."""
    spool = folder(agent, name) / "spool"
    files = [spool / "inbox.ndjson", *sorted((spool / "sessions").glob("*.ndjson"))]
    return [json.loads(line) for f in files if f.exists() for line in f.read_text().splitlines()]


def outbox_state(agent: Agent, msg_id: str) -> str:
    return str(agent.ok("status", msg_id, "--json").json()["state"])


def register(agent: Agent, sid: str) -> subprocess.Popen[bytes]:
    host = subprocess.Popen(["sleep", "300"])
    agent.ok("session", "register", "--host", "claude", "--id", sid, "--pid", str(host.pid))
    return host


@pytest.fixture
def talking(tmp_path: Path, relay: RelayProcess) -> Iterator[tuple[Agent, Agent, subprocess.Popen[bytes]]]:
    """alice and bob by invite; bob's follower runs with one live agent session, "s1"."""
    alice = make_agent(tmp_path, relay, "alice", None)
    bob = make_agent(tmp_path, relay, "bob", None)
    # bob's receipts leave at most 0.2 s after their cause (not up to 2 s).
    bob.extra_env = {"TALK_DEPOSIT_JITTER": "0.05,0.2"}
    befriend(alice, bob)
    host = register(bob, "s1")
    bob.ok("follow", "--peer", "alice")
    try:
        yield alice, bob, host
    finally:
        bob.run("stop")
        alice.run("stop")
        host.kill()
        host.wait()


def take(bob: Agent, sid: str = "s1") -> list[SpoolRecord]:
    return SessionMail(folder(bob, "bob"), sid).take()


# ---------------------------------------------------------------- receipts and the outbox

def test_wait_delivered_returns_once_an_alarm_hands_the_message_over(
    talking: tuple[Agent, Agent, subprocess.Popen[bytes]],
) -> None:
    alice, bob, _ = talking
    waiting = subprocess.Popen([TALK, "send", "bob", "please look", "--wait", "delivered",
                                "--timeout", "30", "--json"], env=alice.env(),
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    wait_for(lambda: any(r["text"] == "please look" for r in spool_records(bob, "bob")), 10, "the spool")
    time.sleep(0.5)
    assert waiting.poll() is None, "--wait delivered returned before any agent had the message"
    handed = take(bob)
    handed_at = time.monotonic()
    assert [r["text"] for r in handed] == ["please look"]
    out, err = waiting.communicate(timeout=10)
    elapsed = time.monotonic() - handed_at
    assert waiting.returncode == 0, err
    report = json.loads(out)
    # Promptly, not timed here: bench/receipt_latency.py measures it (≤ 1 s is the target).
    assert report["state"] == "delivered" and elapsed < 10, (report, elapsed)
    assert outbox_state(alice, report["id"]) == "delivered"
    rows = alice.ok("outbox", "--json").json()
    assert [(r["id"], r["state"], r["name"]) for r in rows] == [(report["id"], "delivered", "bob")]
    assert "blob" not in rows[0] and "tag" not in rows[0]


def test_wait_times_out_with_exit_4(talking: tuple[Agent, Agent, subprocess.Popen[bytes]]) -> None:
    alice, _, _ = talking
    r = alice.run("send", "bob", "nobody takes this", "--wait", "delivered", "--timeout", "2")
    assert r.code == 4 and "still spooled" in r.err and "Traceback" not in r.err


def test_a_refused_contact_gets_refused(talking: tuple[Agent, Agent, subprocess.Popen[bytes]]) -> None:
    alice, bob, _ = talking
    assert bob.run("policy", "alice", "refuse").code == 1  # off a terminal it needs --yes
    assert bob.ok("policy", "alice", "--json").json()["policy"] == "accept"
    bob.ok("policy", "alice", "refuse", "--yes")
    r = alice.run("send", "bob", "let me in", "--wait", "spooled", "--timeout", "15", "--json")
    assert r.code == 1 and "refused" in r.err and "does not accept" in r.err
    (row,) = alice.ok("outbox", "--json").json()
    assert row["state"] == "refused" and "does not accept" in row["reason"]
    assert not [x for x in spool_records(bob, "bob") if x["text"] == "let me in"]
    log = [json.loads(x) for x in (folder(bob, "bob") / "trust.log").read_text().splitlines()]
    assert log[-1]["after"]["policy"] == "refuse" and log[-1]["before"]["policy"] == "accept"


def test_held_mail_released_is_delivered_and_left_alone_expires(
    talking: tuple[Agent, Agent, subprocess.Popen[bytes]],
) -> None:
    alice, bob, _ = talking
    alice.ok("follow", "--peer", "bob")  # alice's follower takes her receipts
    bob.ok("policy", "alice", "hold", "--yes")
    keep = alice.ok("send", "bob", "hold me", "--json").json()["id"]
    wait_for(lambda: outbox_state(alice, keep) == "held", 10, "the held receipt")
    assert [h["id"] for h in bob.ok("held", "--json").json()] == [keep]
    assert take(bob) == []  # held mail never reaches an agent
    assert bob.run("held", "accept", keep).code == 1  # needs --yes off a terminal
    bob.ok("held", "accept", keep[:8], "--yes")
    wait_for(lambda: outbox_state(alice, keep) == "spooled", 10, "the spooled receipt")
    assert [r["id"] for r in take(bob)] == [keep]
    wait_for(lambda: outbox_state(alice, keep) == "delivered", 10, "the delivered receipt")

    # Now held mail expires after 3 s: bob's follower starts again with that limit. (Not from the
    # start: on a busy machine the commands above can take longer than any short limit.)
    bob.ok("stop")
    bob.extra_env = {**bob.extra_env, "TALK_HOLD_HOURS": str(3 / 3600)}
    bob.ok("follow", "--peer", "alice")
    gone = alice.ok("send", "bob", "nobody releases me", "--json").json()["id"]
    wait_for(lambda: outbox_state(alice, gone) == "expired", 20, "the expired receipt")
    assert bob.ok("held", "--json").json() == []
    assert gone not in {r["id"] for r in spool_records(bob, "bob")}


def test_lost_receipts_and_a_sender_restart_converge_without_duplicates(
    tmp_path: Path, relay: RelayProcess
) -> None:
    alice = make_agent(tmp_path, relay, "alice", None)
    bob = make_agent(tmp_path, relay, "bob", None)
    befriend(alice, bob)
    alice_fp = alice.ok("id", "--json").json()["fingerprint"]
    alice.extra_env = {"TALK_RESEND_AFTER": "1"}
    # bob reaches the relay through a proxy that loses his first six deposits into alice's
    # mailbox (his receipts) while answering "stored".
    proxy = LossyProxy(relay.port, lambda line: f"POST /v1/mail/{alice_fp}/" in line
                       and "/fetch" not in line and "/ack" not in line and len(proxy.lost) < 6)
    bob.relay_url = proxy.url
    bob.ok("follow", "--peer", "alice", "--interval", "0.3")  # the proxy carries no push stream
    alice.ok("follow", "--peer", "bob")
    try:
        sent = [alice.ok("send", "bob", f"m{i}", "--json").json()["id"] for i in range(6)]
        pid = alice.ok("status", "--json").json()["follower"]["pid"]
        os.kill(pid, signal.SIGKILL)  # the sender dies mid-way ...
        sent += [alice.ok("send", "bob", f"m{i}", "--json").json()["id"] for i in range(6, 9)]
        alice.ok("follow", "--peer", "bob")  # ... and comes back
        # bob's receipts go one message per peer (follower.receive.receipts), so each lost one
        # can cost a round of resends, whose backoff doubles from 1 s: six rounds take up to
        # 1 + 2 + 4 + 8 + 16 + 32 s, then the answers' own pauses.
        wait_for(lambda: all(outbox_state(alice, m) in ("spooled", "delivered") for m in sent),
                 sum(2 ** k for k in range(6)) + 60, "every message to be confirmed")
        assert len(proxy.lost) == 6
        counts = Counter(r["id"] for r in spool_records(bob, "bob"))
        assert counts == Counter(sent)  # each once, none lost
        rows = {r["id"]: r for r in alice.ok("outbox", "--json").json()}
        assert any(rows[m]["attempts"] > 1 for m in sent), "no resend happened"
    finally:
        bob.run("stop")
        alice.run("stop")
        proxy.die()


# ---------------------------------------------------------------- tasks

def test_a_task_answered_with_reply_shows_on_both_sides(
    talking: tuple[Agent, Agent, subprocess.Popen[bytes]],
) -> None:
    alice, bob, _ = talking
    alice.ok("follow", "--peer", "bob")
    bob.ok("policy", "alice", "accept", "--tasks", "--yes")
    sent = alice.ok("send", "bob", "--task", "count the tests", "--json").json()
    task = sent["task"]
    assert task.startswith("alice-")
    got: list[SpoolRecord] = []
    wait_for(lambda: take_into(bob, got), 10, "the task")
    (line,) = got
    assert (line["kind"], line["task"], line["task_trust"], line["retry"]) == ("task", task, True, False)
    # A task's other headers are undeclared (spool_writer.record): read them as untyped data.
    assert line["mode"] == "one-shot" and dict(line)["mesh_from"] == "alice"
    shown = frame([line])
    assert "--- task 1 of 1 from alice" in shown and f"talk reply {task}" in shown
    bob.ok("reply", task, "--status", "done", "--summary", "612 tests", "--artifacts", "report.txt, log.txt")
    wait_for(lambda: any(r.get("kind") == "result" for r in spool_records(alice, "alice")), 10, "the result")
    (result,) = [r for r in spool_records(alice, "alice") if r.get("kind") == "result"]
    assert (result["task"], result["status"], result["summary"]) == (task, "done", "612 tests")
    assert result["artifacts"] == ["report.txt", "log.txt"]
    for agent, asked_by in ((alice, "me"), (bob, "peer")):
        (row,) = agent.ok("tasks", "--json").json()
        assert (row["task"], row["status"], row["summary"], row["asked_by"]) == (task, "done", "612 tests",
                                                                                  asked_by)
    # The same task id again from alice (her retry) is marked as one.
    envelope = line["text"]
    alice.ok("send", "bob", envelope)
    again: list[SpoolRecord] = []
    wait_for(lambda: take_into(bob, again), 10, "the retried task")
    assert again[0]["retry"] is True and again[0]["task"] == task


def take_into(bob: Agent, sink: list[SpoolRecord]) -> bool:
    sink.extend(take(bob))
    return bool(sink)


def test_a_task_from_a_contact_without_task_trust_is_plain_text(
    talking: tuple[Agent, Agent, subprocess.Popen[bytes]],
) -> None:
    alice, bob, _ = talking
    alice.ok("send", "bob", "--task", "rm -rf everything")
    got: list[SpoolRecord] = []
    wait_for(lambda: take_into(bob, got), 10, "the message")
    (line,) = got
    assert line["kind"] == "task" and line["task_trust"] is False
    shown = frame([line])
    assert "--- message 1 of 1 from alice" in shown and "WARNING" in shown
    assert "talk reply" not in shown and "Carry it out" not in shown


# ---------------------------------------------------------------- loops and floods

def test_forwarding_past_four_hops_is_refused(
    talking: tuple[Agent, Agent, subprocess.Popen[bytes]],
) -> None:
    alice, bob, _ = talking
    alice.ok("follow", "--peer", "bob")
    first = alice.ok("send", "bob", "pass it on", "--json").json()["id"]
    hops_seen = []
    current, holder, other = first, (bob, "bob"), (alice, "alice")

    def arrived(msg: str, at: tuple[Agent, str]) -> Callable[[], bool]:
        return lambda: msg in {r["id"] for r in spool_records(*at)}

    for _ in range(4):  # bob→alice→bob→alice→bob: four forwards, each adds a hop
        wait_for(arrived(current, holder), 10, "the forward")
        line = next(r for r in spool_records(*holder) if r["id"] == current)
        hops_seen.append(len(line.get("hops", [])))
        current = holder[0].ok("forward", current, other[1], "--json").json()["id"]
        holder, other = other, holder
    wait_for(arrived(current, holder), 10, "the fourth forward")
    assert hops_seen == [0, 1, 2, 3]
    r = holder[0].run("forward", current, other[1])
    assert r.code == 1 and "hops" in r.err  # the sender's own check
    # A sender that skips that check: the peer refuses with a receipt.
    a = keystore.unlock(keystore.load(folder(alice, "alice")), None)
    bob_contact = ContactBook(folder(alice, "alice")).get("bob")
    hops = [bob_contact.fingerprint, a.fingerprint] * 3
    with RelayClient(alice.relay_url) as client:
        looped = send_message(a, client, bob_contact, "looping", outbox=Outbox(folder(alice, "alice")),
                              hops=hops[:5])
    wait_for(lambda: outbox_state(alice, looped.id) == "refused", 10, "the refusal")
    assert looped.id not in {r["id"] for r in spool_records(bob, "bob")}


def test_a_burst_over_the_receive_limit_is_held_not_lost(
    talking: tuple[Agent, Agent, subprocess.Popen[bytes]],
) -> None:
    alice, bob, _ = talking
    # Held mail must outlive a slow, loaded run here: this test counts it, it does not expire it.
    bob.ok("stop")
    bob.extra_env["TALK_HOLD_HOURS"] = "1"
    bob.ok("follow", "--peer", "alice")
    alice.ok("follow", "--peer", "bob")
    bob.ok("policy", "alice", "--receive-rate", "3", "--yes")
    sent = [alice.ok("send", "bob", f"burst {i}", "--json").json()["id"] for i in range(6)]
    wait_for(lambda: all(outbox_state(alice, m) in ("held", "spooled") for m in sent), 60, "six receipts")
    states = Counter(outbox_state(alice, m) for m in sent)
    assert states == Counter({"spooled": 3, "held": 3})
    held = bob.ok("held", "--json").json()
    assert len(held) == 3 and all("receive limit" in h["reason"] for h in held)
    spooled = {r["id"] for r in spool_records(bob, "bob")}
    assert spooled | {h["id"] for h in held} == set(sent)  # every message is somewhere


def test_the_send_rate_stops_a_looping_sender(
    talking: tuple[Agent, Agent, subprocess.Popen[bytes]],
) -> None:
    alice, _, _ = talking
    alice.ok("policy", "bob", "--send-rate", "2", "--yes")
    alice.ok("send", "bob", "one")
    alice.ok("send", "bob", "two")
    r = alice.run("send", "bob", "three")
    assert r.code == 1 and "not sent" in r.err and "retry in" in r.err
    assert [row["text"] for row in alice.ok("outbox", "--json").json()] == ["one", "two"]


@pytest.mark.own_relay
def test_receipts_travel_on_their_own_tag(talking: tuple[Agent, Agent, subprocess.Popen[bytes]],
                                          relay: RelayProcess) -> None:
    """The relay cannot tell a receipt's channel from the chat channel's, nor link the two."""
    import sqlite3

    alice, bob, _ = talking
    msg = alice.ok("send", "bob", "hello", "--json").json()["id"]
    wait_for(lambda: msg in {r["id"] for r in spool_records(bob, "bob")}, 10, "the spool")
    a = keystore.unlock(keystore.load(folder(alice, "alice")), None)
    bob_contact = ContactBook(folder(alice, "alice")).get("bob")
    expected = receipt_tag(a.box_secret, PublicKey(bob_contact.box_key), a.fingerprint)
    with sqlite3.connect(relay.db) as db:
        wait_for(lambda: bool(db.execute("SELECT 1 FROM mail WHERE tag = ?", (expected,)).fetchall()),
                 10, "bob's receipt on the relay")
        assert db.execute("SELECT COUNT(*) FROM mail WHERE fp = ?", (a.fingerprint,)).fetchone()[0] >= 1


def test_bad_input_to_the_conversation_commands_is_one_clear_line(pair: tuple[Agent, Agent]) -> None:
    alice, _ = pair
    cases = [
        (["policy", "bob", "maybe", "--yes"], "accept, hold or refuse"),
        (["policy", "bob", "--receive-rate", "0", "--yes"], "between 1 and 100000"),
        (["policy", "nobody"], "no contact"),
        (["send", "bob", "hi", "--wait", "read"], "--wait must be one of"),
        (["send", "bob", "hi", "--task", "--mode", "forever"], "cannot send this task"),
        (["status", "0123456789abcdef"], "no sent message"),
        (["held", "accept", "feedbeef", "--yes"], "no held message"),
        (["reply", "nosuch-task", "--status", "done", "--summary", "x"], "no received task"),
        (["forward", "0" * 32, "bob"], "no received message"),
    ]
    for args, says in cases:
        r = alice.run(*args)
        assert r.code == 1, (args, r.code, r.err)
        assert says in r.err and r.err.strip().count("\n") == 0 and "Traceback" not in r.err, (args, r.err)
    assert alice.ok("outbox", "--json").json() == []  # the refused sends left nothing behind


@pytest.mark.own_relay
def test_the_outbox_fetches_waiting_receipts_itself(pair: tuple[Agent, Agent], relay: RelayProcess) -> None:
    """No follower anywhere: bob reads with `talk receive`, whose receipt waits on the relay;
    `talk outbox` takes it rather than showing a state the sender no longer has."""
    alice, bob = pair
    msg = alice.ok("send", "bob", "read me", "--json").json()["id"]
    assert [m["text"] for m in bob.ok("receive").lines()] == ["read me"]
    [offline] = alice.ok("outbox", "--offline", "--json").json()
    assert (offline["id"], offline["state"]) == (msg, "stored")
    [fetched] = alice.ok("outbox", "--json").json()
    assert fetched["state"] == "delivered"
    relay.stop()
    r = alice.run("outbox", "--json")  # the relay is away: say so, and show what is known
    assert r.code == 0 and "receipts not fetched" in r.err and "Traceback" not in r.err
    assert [row["state"] for row in json.loads(r.out)] == ["delivered"]
    relay.start()
