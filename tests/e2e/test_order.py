"""Replays, drops, reordering and stale mail, performed against a real relay and real `talk`.

The relay here is the attacker: the tests read sealed blobs out of its SQLite file or out of
the sender's outbox, deposit them again with the project's client, or delete one before the
receiver fetches. What a relay cannot do is forge: the crafted envelopes are sealed with the
sender's own key through the project's own code.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from follower.relay.client import RelayClient
from follower.send.outbound import send
from follower.send.outbox import Outbox
from follower.send.upload import MOST_TEXT
from keys import keystore
from keys.contacts import ContactBook
from keys.encoding import b64d
from keys.envelope import Inner, channel_tag, open_blob, seal
from keys.identity import Identity
from keys.sodium import PublicKey
from tests.conftest import TALK, Agent, RelayProcess, wait_for


def identity(agent: Agent, name: str) -> Identity:
    pfile = agent.passphrase_file
    passphrase = keystore.read_passphrase_file(str(pfile)) if pfile else None
    return keystore.unlock(keystore.load(agent.home / name), passphrase)


def sent_blob(agent: Agent, name: str, msg_id: str) -> tuple[str, str, bytes]:
    """(recipient fingerprint, tag, sealed blob) of a message in the sender's outbox."""
    entry = Outbox(agent.home / name).entries()[msg_id]
    return entry.to, entry.tag, b64d(entry.blob)


def redeposit(relay: RelayProcess, blob: tuple[str, str, bytes]) -> None:
    with RelayClient(relay.url) as client:
        client.deposit(*blob)


def drop_on_relay(relay: RelayProcess, blob: tuple[str, str, bytes]) -> None:
    with sqlite3.connect(relay.db) as db:
        assert db.execute("DELETE FROM mail WHERE blob = ?", (blob[2],)).rowcount == 1


def waiting(relay: RelayProcess, fp: str) -> int:
    with sqlite3.connect(relay.db) as db:
        return int(db.execute("SELECT COUNT(*) FROM mail WHERE fp = ?", (fp,)).fetchone()[0])


def spooled(agent: Agent, name: str) -> list[dict[str, Any]]:
    inbox = agent.home / name / "spool" / "inbox.ndjson"
    if not inbox.exists():
        return []
    return [json.loads(line) for line in inbox.read_text().splitlines() if line.strip()]


def say(agent: Agent, text: str) -> str:
    return str(agent.ok("send", "bob", text, "--json").json()["id"])


def missing(agent: Agent) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = agent.ok("status", "--json").json()["missing"]
    return rows


@pytest.fixture
def follower(pair: tuple[Agent, Agent]) -> Iterator[Agent]:
    """bob's follower, stopped at the end (each test starts it when it needs it)."""
    _, bob = pair
    yield bob
    bob.run("stop")


@pytest.mark.own_relay
def test_a_replayed_blob_is_shown_once_by_receive_and_by_the_follower(
        pair: tuple[Agent, Agent], relay: RelayProcess, follower: Agent) -> None:
    alice, bob = pair
    bob_fp = bob.ok("id", "--json").json()["fingerprint"]
    first = say(alice, "first, read by talk receive")
    first_blob = sent_blob(alice, "alice", first)
    assert [m["id"] for m in bob.ok("receive").lines()] == [first]
    redeposit(relay, first_blob)  # the relay serves it again
    again = bob.ok("receive")
    assert again.lines() == [] and waiting(relay, bob_fp) == 0  # acked, not shown
    # The follower shares the store: what `talk receive` showed, it does not spool.
    bob.ok("follow", "--peer", "alice")
    redeposit(relay, first_blob)
    second = say(alice, "second, spooled by the follower")
    wait_for(lambda: second in [m["id"] for m in spooled(bob, "bob")], 20, "the second message")
    wait_for(lambda: waiting(relay, bob_fp) == 0, 20, "the replay to be acked")
    assert [m["id"] for m in spooled(bob, "bob")] == [second]
    # And the other way: what the follower spooled, `talk receive` does not print.
    second_blob = sent_blob(alice, "alice", second)
    bob.ok("stop")
    redeposit(relay, second_blob)
    assert bob.ok("receive").lines() == [] and waiting(relay, bob_fp) == 0
    # The follower itself, fed its own message twice, spools it once.
    bob.ok("follow", "--peer", "alice")
    redeposit(relay, second_blob)
    third = say(alice, "third")
    wait_for(lambda: third in [m["id"] for m in spooled(bob, "bob")], 20, "the third message")
    wait_for(lambda: waiting(relay, bob_fp) == 0, 20, "the replay to be acked")
    assert [m["id"] for m in spooled(bob, "bob")] == [second, third]


def test_two_receives_at_once_print_each_message_once(
        pair: tuple[Agent, Agent], relay: RelayProcess) -> None:
    alice, bob = pair
    me = identity(alice, "alice")
    to_bob = ContactBook(alice.home / "alice").get("bob")
    outbox = Outbox(alice.home / "alice")
    with RelayClient(relay.url) as client:
        sent = [send(me, client, to_bob, f"burst {i}", outbox=outbox).id for i in range(40)]
    procs = [subprocess.Popen([TALK, "receive"], env=bob.env(), stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)
             for _ in range(2)]
    outputs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [err for _, err in outputs]
    printed = Counter(json.loads(line)["id"] for out, _ in outputs for line in out.splitlines() if line)
    assert set(printed) == set(sent) and max(printed.values()) == 1


@pytest.mark.own_relay
def test_a_dropped_message_shows_as_a_gap_until_it_comes(
        pair: tuple[Agent, Agent], relay: RelayProcess) -> None:
    alice, bob = pair
    ids = [say(alice, f"step {i}") for i in (1, 2, 3)]
    dropped = sent_blob(alice, "alice", ids[1])
    drop_on_relay(relay, dropped)
    got = bob.ok("receive").lines()
    assert [m["id"] for m in got] == [ids[0], ids[2]]
    assert "gap" not in got[0] and got[1]["gap"] == 1  # the agent is told on the next message
    assert missing(bob) == [{"from": alice.ok("id", "--json").json()["fingerprint"],
                             "name": "alice", "count": 1}]
    assert "1 message from alice missing" in bob.ok("status").out
    # The relay hands it over late (reordered: seq 3 came before seq 2): shown, and the gap clears.
    redeposit(relay, dropped)
    late = bob.ok("receive").lines()
    assert [m["id"] for m in late] == [ids[1]] and late[0]["late"] is True and "gap" not in late[0]
    assert missing(bob) == [] and "missing" not in bob.ok("status").out
    # The same blob again is a duplicate, not a second fill.
    redeposit(relay, dropped)
    assert bob.ok("receive").lines() == []


@pytest.mark.own_relay
def test_a_message_dropped_while_the_follower_waits_is_on_the_next_spool_line(
        pair: tuple[Agent, Agent], relay: RelayProcess, follower: Agent) -> None:
    alice, bob = pair
    bob_fp = bob.ok("id", "--json").json()["fingerprint"]
    ids = [say(alice, f"queued {i}") for i in range(4)]
    drop_on_relay(relay, sent_blob(alice, "alice", ids[1]))
    drop_on_relay(relay, sent_blob(alice, "alice", ids[2]))
    bob.ok("follow", "--peer", "alice")
    wait_for(lambda: len(spooled(bob, "bob")) == 2, 20, "the two messages left")
    lines = spooled(bob, "bob")
    assert [m["id"] for m in lines] == [ids[0], ids[3]]
    assert "gap" not in lines[0] and lines[1]["gap"] == 2
    wait_for(lambda: waiting(relay, bob_fp) == 0, 20, "the acks")
    assert [(r["name"], r["count"]) for r in missing(bob)] == [("alice", 2)]
    assert "2 messages from alice missing" in bob.ok("status").out


def _craft(alice: Agent, bob: Agent, text: str, when: datetime, seq: int | None) -> tuple[str, str, bytes]:
    """A message really sealed by alice's key (as alice's own client would), dated `when`."""
    me = identity(alice, "alice")
    to_bob = ContactBook(alice.home / "alice").get("bob")
    ts = when.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    inner = Inner(f"{int(when.timestamp() * 1e6):032x}", me.fingerprint, to_bob.fingerprint, ts,
                  "chat", text, {}, seq)
    peer = PublicKey(to_bob.box_key)
    return to_bob.fingerprint, channel_tag(me.box_secret, peer, to_bob.fingerprint), \
        seal(inner, me.box_secret, peer)


@pytest.mark.own_relay
def test_stale_and_future_dated_mail_is_refused_and_later_mail_flows(
        pair: tuple[Agent, Agent], relay: RelayProcess) -> None:
    alice, bob = pair
    bob_fp = bob.ok("id", "--json").json()["fingerprint"]
    now = datetime.now(UTC)
    redeposit(relay, _craft(alice, bob, "a month old", now - timedelta(days=30), None))
    redeposit(relay, _craft(alice, bob, "from next week", now + timedelta(days=7), None))
    fresh = say(alice, "today")
    r = bob.run("receive")
    # Refusals leave a line on stderr each; the exit status may say something was refused (2).
    assert r.code in (0, 2), r.err
    assert [m["id"] for m in r.lines()] == [fresh]
    assert "refused as stale" in r.err and "days ago" in r.err and "ahead" in r.err
    assert waiting(relay, bob_fp) == 0  # acked: never fetched again, never in the way
    later = say(alice, "tomorrow")
    assert [m["id"] for m in bob.ok("receive").lines()] == [later]
    assert missing(bob) == []


def test_a_number_used_twice_is_refused_as_a_replay(
        pair: tuple[Agent, Agent], relay: RelayProcess) -> None:
    alice, bob = pair
    first = say(alice, "numbered 2")  # 1 went with "contact accepted"
    assert [m["id"] for m in bob.ok("receive").lines()] == [first]
    redeposit(relay, _craft(alice, bob, "numbered 2 again", datetime.now(UTC), 2))
    r = bob.run("receive")
    assert r.code in (0, 2) and r.lines() == [] and "refused as a replay" in r.err


def seqs_to(bob: Agent, blobs: list[tuple[str, str, bytes]]) -> list[int | None]:
    me = identity(bob, "bob")
    book = ContactBook(bob.home / "bob")
    return [open_blob(blob, me.box_secret, me.fingerprint, book.with_box_key, lambda c: c.fingerprint,
                      me.kem_seed)[1].seq for _, _, blob in blobs]


def test_concurrent_sends_get_distinct_numbers(pair: tuple[Agent, Agent], relay: RelayProcess) -> None:
    alice, bob = pair
    procs = [subprocess.Popen([TALK, "send", "bob", f"racing {i}", "--json"], env=alice.env(),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              stdin=subprocess.DEVNULL, text=True) for i in range(8)]
    outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0] * 8, [err for _, err in outs]
    ids = [json.loads(out)["id"] for out, _ in outs]
    blobs = [sent_blob(alice, "alice", i) for i in ids]
    assert sorted(s or 0 for s in seqs_to(bob, blobs)) == list(range(2, 10))
    r = bob.ok("receive")
    assert sorted(m["id"] for m in r.lines()) == sorted(ids) and "replay" not in r.err
    assert missing(bob) == []


def test_a_store_carried_over_from_seen_log_keeps_its_ids(
        pair: tuple[Agent, Agent], relay: RelayProcess, tmp_path: Path) -> None:
    alice, bob = pair
    folder = bob.home / "bob"
    shown = say(alice, "shown before the upgrade")
    blob = sent_blob(alice, "alice", shown)
    assert [m["id"] for m in bob.ok("receive").lines()] == [shown]
    # As if bob had read it with the version that kept seen.log, and upgraded since.
    (folder / "channels.db").unlink()
    for suffix in ("-wal", "-shm"):
        (folder / f"channels.db{suffix}").unlink(missing_ok=True)
    (folder / "seen.log").write_text(f"{datetime.now(UTC).timestamp():.0f} {shown}\n")
    redeposit(relay, blob)
    assert bob.ok("receive").lines() == []
    later = say(alice, "after the upgrade")
    got = bob.ok("receive").lines()
    assert [m["id"] for m in got] == [later] and "gap" not in got[0]  # alice counted before bob did
    assert (folder / "seen.log").exists() and oct((folder / "channels.db").stat().st_mode & 0o777) == "0o600"


@pytest.mark.own_relay
def test_a_follower_killed_between_spool_and_store_leaves_nothing_to_show_twice(
        pair: tuple[Agent, Agent], relay: RelayProcess, follower: Agent) -> None:
    alice, bob = pair
    bob_fp = bob.ok("id", "--json").json()["fingerprint"]
    bob.ok("follow", "--peer", "alice")
    spooled_id = say(alice, "spooled, then the follower dies")
    wait_for(lambda: [m["id"] for m in spooled(bob, "bob")] == [spooled_id], 20, "the spool line")
    wait_for(lambda: waiting(relay, bob_fp) == 0, 20, "the ack")
    bob.ok("stop")
    # The state a SIGKILL right after the spool write leaves: the line and the spool's index
    # have it, the shared store does not, and the relay still holds it (never acked).
    with sqlite3.connect(bob.home / "bob" / "channels.db") as db:
        assert db.execute("DELETE FROM seen WHERE id = ?", (spooled_id,)).rowcount == 1
        db.execute("UPDATE channel SET highest = highest - 1")
    redeposit(relay, sent_blob(alice, "alice", spooled_id))
    r = bob.ok("receive")
    assert r.lines() == [] and waiting(relay, bob_fp) == 0
    later = say(alice, "next")
    got = bob.ok("receive").lines()
    assert [m["id"] for m in got] == [later] and "gap" not in got[0]  # the store was repaired


def test_mail_that_reaches_no_agent_leaves_no_false_gap(pair: tuple[Agent, Agent]) -> None:
    alice, bob = pair
    too_long = alice.run("send", "bob", "-", stdin="x" * (MOST_TEXT + 1))
    assert too_long.code == 1  # refused before sealing: it used up no number
    bob.ok("policy", "alice", "hold", "--yes")
    held = say(alice, "held aside")
    assert bob.ok("receive").lines() == []
    assert [h["id"] for h in bob.ok("held", "--json").json()] == [held]
    bob.ok("policy", "alice", "accept", "--yes")
    shown = say(alice, "shown")
    got = bob.ok("receive").lines()
    assert [m["id"] for m in got] == [shown] and "gap" not in got[0]  # the held one came
    assert missing(bob) == []
