"""Pairwise mail in Olm sessions over a real relay: both directions, an old-format peer,
a replay, and a receiver that lost its session state."""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import os
import re
import shutil
import signal
import sqlite3
import stat
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import vodozemac
from nacl import secret
from nacl.exceptions import CryptoError

from durable.errors import TamperedMessage
from durable.ndjson import json_lines, read_records
from follower.receive.receipts import deposit, seal_receipts
from follower.relay.client import RelayClient
from follower.send.outbox import Outbox
from follower.send.resending import Cause
from keys import keystore
from keys.contacts import Contact, ContactBook
from keys.encoding import b64d, b64e
from keys.envelope import BUCKETS, HYBRID_EXTRA, OVERHEAD, Inner, channel_tag, new_message, open_blob, seal
from keys.identity import Identity
from keys.ratchet.account import RatchetAccount, card_for
from keys.ratchet.card import verify_card
from keys.ratchet.envelope import OLM_FIELD, olm_part, unwrap
from keys.ratchet.inflight import CONTEXT as INFLIGHT_CONTEXT
from keys.ratchet.inflight import INFLIGHT_FILE, RESEND_WINDOW_S, Inflight
from keys.ratchet.sessions import SESSIONS_DIR, RatchetSessions, Unopened, stored_state
from keys.sodium import PublicKey
from tests.conftest import Agent, RelayProcess, befriend, free_port, make_agent, wait_for
from tests.e2e.probes import sent, spool_ids, texts

# A follower whose process is killed (SIGKILL) once a page holding mail is durable in the spool
# and the channel store, before the session store commits the ratchet step.
KILLED_AFTER_HAND_OVER = """
import contextlib, os, signal
from follower.daemon.daemon import Follower
from talk.context import open_account

follower = Follower(open_account(None, None, None))
follower.config.every = True
durable_page = follower.receiver.page

@contextlib.contextmanager
def page():
    with durable_page():
        yield
    if follower.status.delivered:
        os.kill(os.getpid(), signal.SIGKILL)

follower.receiver.page = page
follower.drain()
"""

UNOPENED = Cause.UNOPENED.value  # how a refusal of a message no held session opens begins


def unlocked(agent: Agent, name: str) -> Identity:
    pfile = agent.passphrase_file
    return keystore.unlock(keystore.load(agent.home / name),
                           keystore.read_passphrase_file(str(pfile)) if pfile else None)


def waiting(relay: RelayProcess, fp: str) -> int:
    with sqlite3.connect(relay.db) as db:
        return int(db.execute("SELECT COUNT(*) FROM mail WHERE fp = ?", (fp,)).fetchone()[0])


def spooled_ids(agent: Agent, name: str) -> list[str]:
    inbox = agent.home / name / "spool" / "inbox.ndjson"
    return [json.loads(line)["id"] for line in inbox.read_text().splitlines() if line.strip()]


def opened(sender: Agent, sender_name: str, msg_id: str, receiver: Agent, receiver_name: str) -> Inner:
    """The inner envelope of a message in the sender's outbox, as its receiver opens the seal."""
    me = unlocked(receiver, receiver_name)
    blob = b64d(Outbox(sender.home / sender_name).entries()[msg_id].blob)
    book = ContactBook(receiver.home / receiver_name)
    return open_blob(blob, me.box_secret, me.fingerprint, book.with_box_key, lambda c: c.fingerprint,
                     me.kem_seed)[1]


def secrecy(agent: Agent) -> dict[str, bool]:
    return {c["name"]: c["forward_secrecy"] for c in agent.ok("contacts", "--json").json()}


def old_format(tmp_path: Path, relay: RelayProcess, name: str) -> Agent:
    """An identity as talk made them before ratchet keys: none published, none used."""
    agent = Agent(tmp_path / f"home-{name}", relay.url, None, {"TALK_RATCHET": "off"})
    agent.ok("init", name, "--no-passphrase")
    return agent


def test_mail_rides_a_session_both_ways_inside_the_sealed_envelope(pair: tuple[Agent, Agent]) -> None:
    alice, bob = pair
    first = sent(alice, "alice", "hello in a session", "bob")
    inner = opened(alice, "alice", first, bob, "bob")
    assert "olm" in inner.extra and inner.text == "" and "hello" not in str(inner.extra)
    assert texts(bob) == ["hello in a session"]
    sent(bob, "bob", "and back", "alice")
    assert texts(alice) == ["and back"]
    later = sent(alice, "alice", "riding on", "bob")
    assert opened(alice, "alice", later, bob, "bob").extra["olm"]["type"] == 1  # no pre-key any more
    assert texts(bob) == ["riding on"]
    assert secrecy(alice) == {"bob": True} and secrecy(bob) == {"alice": True}
    assert "(invited; forward secrecy; post-quantum: yes)" in alice.ok("contacts").out


def test_a_one_way_stream_leaves_pre_key_messages_once_its_receipts_answer(pair: tuple[Agent, Agent]) -> None:
    alice, bob = pair
    first = sent(alice, "alice", "one", "bob")
    second = sent(alice, "alice", "two", "bob")
    for msg_id in (first, second):  # bob never answered: each may start his side, card and all
        assert opened(alice, "alice", msg_id, bob, "bob").extra["olm"]["type"] == 0
    assert texts(bob) == ["one", "two"]  # bob writes nothing back; his receipt answers in the session
    assert alice.ok("receive").lines() == []  # alice takes the receipt: the session is confirmed
    later = sent(alice, "alice", "three", "bob")
    inner = opened(alice, "alice", later, bob, "bob")
    assert inner.extra["olm"]["type"] == 1 and "card" not in inner.extra["olm"]
    sizes = {i: len(b64d(e.blob)) for i, e in Outbox(alice.home / "alice").entries().items()}
    assert sizes[later] == BUCKETS[0] + OVERHEAD + HYBRID_EXTRA < sizes[first]  # short form: smallest bucket
    assert texts(bob) == ["three"]
    bob_fp = bob.ok("id", "--json").json()["fingerprint"]
    history = stored_state(alice.home / "alice" / SESSIONS_DIR / f"{bob_fp}.json")
    assert "unopened" not in history and len(history["sessions"]) == 1


def test_a_message_too_long_for_a_session_keeps_forward_secrecy(pair: tuple[Agent, Agent]) -> None:
    """A session message holds about three quarters of what today's envelope does (its body is
    base64); a longer text goes as a sealed body whose key rides in the session message, so it
    keeps forward secrecy like any other (`follower.send.upload`)."""
    alice, bob = pair
    sent(alice, "alice", "start the session", "bob")
    assert texts(bob) == ["start the session"]
    long_text = "long " * 12_000  # 60,000 characters
    long_id = sent(alice, "alice", long_text, "bob")
    assert "olm" in opened(alice, "alice", long_id, bob, "bob").extra
    assert texts(bob) == [long_text]  # its body fetched, opened and inlined by the receiver
    after = sent(alice, "alice", "short again", "bob")
    assert "olm" in opened(alice, "alice", after, bob, "bob").extra  # the session goes on
    assert texts(bob) == ["short again"]


def test_an_old_format_peer_and_a_new_one_talk_both_ways(
        alice: Agent, relay: RelayProcess, tmp_path: Path) -> None:
    carol = old_format(tmp_path, relay, "carol")
    befriend(alice, carol)
    to_carol = sent(alice, "alice", "to the old peer", "carol")
    assert "olm" not in opened(alice, "alice", to_carol, carol, "carol").extra  # today's envelope
    carol_fp = carol.ok("id", "--json").json()["fingerprint"]
    assert (alice.home / "alice" / SESSIONS_DIR / f"{carol_fp}.nocard").exists()  # no claim per send
    assert texts(carol) == ["to the old peer"]
    to_alice = sent(carol, "carol", "from the old peer", "alice")
    assert "olm" not in opened(carol, "carol", to_alice, alice, "alice").extra
    assert texts(alice) == ["from the old peer"]
    assert secrecy(alice) == {"carol": False} and secrecy(carol) == {"alice": False}
    assert "no forward secrecy" in alice.ok("contacts").out


def test_a_replayed_session_message_is_a_duplicate_that_takes_no_ratchet_step(
        pair: tuple[Agent, Agent], relay: RelayProcess) -> None:
    alice, bob = pair
    msg_id = sent(alice, "alice", "once only", "bob")
    assert texts(bob) == ["once only"]
    alice_fp = alice.ok("id", "--json").json()["fingerprint"]
    state = bob.home / "bob" / SESSIONS_DIR / f"{alice_fp}.json"
    before = state.read_bytes()
    entry = Outbox(alice.home / "alice").entries()[msg_id]
    with RelayClient(relay.url) as client:  # what a relay replaying the blob would serve again
        client.deposit(entry.to, entry.tag, b64d(entry.blob))
    r = bob.ok("receive")
    assert r.lines() == [] and "Traceback" not in r.err
    assert state.read_bytes() == before  # not even re-saved
    sent(alice, "alice", "and the next", "bob")
    assert texts(bob) == ["and the next"]


def test_a_receiver_that_lost_its_sessions_gets_the_refused_message_once_in_a_new_session(
        pair: tuple[Agent, Agent], relay: RelayProcess, tmp_path: Path) -> None:
    alice, bob = pair
    sent(alice, "alice", "first", "bob")
    assert texts(bob) == ["first"]
    sent(bob, "bob", "reply", "alice")
    assert texts(alice) == ["reply"]  # alice's session is established: her next is no pre-key message
    carol = old_format(tmp_path, relay, "carol")
    befriend(bob, carol)
    for path in (bob.home / "bob" / SESSIONS_DIR).iterdir():
        path.unlink()  # bob's session state is lost
    lost = sent(alice, "alice", "into the lost session", "bob")
    kept = alice.home / "alice" / INFLIGHT_FILE
    assert lost.encode() in kept.read_bytes() and b"into the lost session" not in kept.read_bytes()
    sent(carol, "carol", "unaffected", "bob")
    r = bob.ok("receive")
    assert [m["text"] for m in r.lines()] == ["unaffected"] and "Traceback" not in r.err
    assert "no session" in bob.ok("quarantine").out
    assert bob.ok("status", "--json").json()["quarantined"] == 1  # lost, for now
    # alice hears why and, with nobody asking, sends it again in a new session, same id.
    alice.ok("receive")
    entry = Outbox(alice.home / "alice").entries()[lost]
    assert entry.recovered and entry.state == "stored"
    assert opened(alice, "alice", lost, bob, "bob").extra["olm"]["type"] == 0
    r = bob.ok("receive")
    assert [(m["id"], m["text"]) for m in r.lines()] == [(lost, "into the lost session")]
    assert texts(bob) == []  # exactly once
    [refusal] = bob.ok("quarantine", "--json").lines()
    assert refusal["id"] == lost and refusal["recovered"] is True  # it came again: not counted as lost
    assert bob.ok("status", "--json").json()["quarantined"] == 0
    assert "recovered" in bob.ok("quarantine").out and "quarantined:" not in bob.ok("status").out
    alice.ok("receive")
    assert Outbox(alice.home / "alice").entries()[lost].state == "delivered"
    assert lost.encode() not in kept.read_bytes()  # settled: erased from the file, not marked
    assert_both_see_it_reestablished(alice, bob)
    sent(alice, "alice", "in the new session", "bob")
    assert texts(bob) == ["in the new session"]
    assert_both_see_it_reestablished(alice, bob)


@pytest.mark.own_relay
def test_a_message_queued_while_the_relay_is_away_is_still_kept_to_be_sealed_anew(
        pair: tuple[Agent, Agent], relay: RelayProcess) -> None:
    """A send keeps its copy while the relay stores the message; one whose request never left
    keeps it all the same before the send returns, so if its receiver lost the session by the
    time it goes, it can still be sealed anew."""
    alice, bob = pair
    sent(alice, "alice", "first", "bob")
    assert texts(bob) == ["first"]
    sent(bob, "bob", "reply", "alice")
    assert texts(alice) == ["reply"]
    relay.stop()
    r = alice.ok("send", "bob", "while the relay is away", "--json").json()
    assert r["state"] == "queued"
    kept = Inflight(alice.home / "alice", unlocked(alice, "alice")).take(r["id"])
    assert kept is not None and kept.text == "while the relay is away"
    relay.start()
    for path in (bob.home / "bob" / SESSIONS_DIR).iterdir():
        path.unlink()  # bob's session state is lost before the queued message reaches him
    alice.ok("receive")  # the queued message goes
    assert texts(bob) == []  # refused: no session
    alice.ok("receive")  # its refusal brings it back, sealed in a new session
    assert texts(bob) == ["while the relay is away"]
    assert texts(bob) == []


def assert_both_see_it_reestablished(alice: Agent, bob: Agent) -> None:
    """Alice (the sender) heard bob lost their session once; bob could not open one message of
    hers; each says the session began again after that."""
    [mine] = alice.ok("status", "--json").json()["forward_secrecy"]
    [theirs] = bob.ok("status", "--json").json()["forward_secrecy"]
    assert (mine["name"], mine["peer_lost"], mine["unopened"]) == ("bob", 1, 0)
    assert (theirs["name"], theirs["peer_lost"], theirs["unopened"]) == ("alice", 0, 1)
    assert mine["reestablished_at"] >= mine["peer_lost_at"]
    assert theirs["reestablished_at"] >= theirs["unopened_at"]
    said, heard = alice.ok("status").out, bob.ok("status").out
    assert "forward secrecy with bob: on; bob lost our session 1 time(s), last" in said
    assert "with alice: on; could not open 1 message from alice for want of a session" in heard
    assert "session re-established" in said and "session re-established" in heard


@pytest.mark.own_relay
def test_a_forged_card_is_a_pin_mismatch_and_nothing_is_sent(
        pair: tuple[Agent, Agent], relay: RelayProcess) -> None:
    alice, bob = pair
    bob_fp = bob.ok("id", "--json").json()["fingerprint"]
    (alice.home / "alice" / SESSIONS_DIR / f"{bob_fp}.json").unlink()  # so she claims a key anew
    with sqlite3.connect(relay.db) as db:  # the relay swaps in an identity key of its own
        card = json.loads(db.execute("SELECT card FROM ratchet_cards WHERE fp = ?", (bob_fp,)).fetchone()[0])
        card["curve25519"] = b64e(bytes(32 * [7]))
        db.execute("UPDATE ratchet_cards SET card = ? WHERE fp = ?", (json.dumps(card), bob_fp))
    r = alice.run("send", "bob", "not with that key")
    assert r.code != 0 and "PIN MISMATCH" in r.err and "Traceback" not in r.err
    assert Outbox(alice.home / "alice").entries() == {} and waiting(relay, bob_fp) == 0


def test_a_pre_key_message_in_another_senders_envelope_is_refused(
        pair: tuple[Agent, Agent], relay: RelayProcess, tmp_path: Path) -> None:
    alice, bob = pair
    mallory = Agent(tmp_path / "home-mallory", relay.url)
    mallory.ok("init", "mallory", "--no-passphrase")
    befriend(bob, mallory)
    genuine = sent(alice, "alice", "from alice", "bob")
    stolen = opened(alice, "alice", genuine, bob, "bob").extra["olm"]  # alice's pre-key message
    me = unlocked(mallory, "mallory")
    own_card = card_for(RatchetAccount(mallory.home / "mallory", me).read(), me).to_json()
    target = ContactBook(mallory.home / "mallory").get("bob")
    peer = PublicKey(target.box_key)
    tag = channel_tag(me.box_secret, peer, target.fingerprint)
    with RelayClient(relay.url) as client:
        for card in (stolen["card"], own_card):  # alice's card, then mallory's own
            inner = new_message(me.fingerprint, target.fingerprint, "", "chat", None,
                                olm={**stolen, "card": card})
            client.deposit(target.fingerprint, tag, seal(inner, me.box_secret, peer))
    r = bob.ok("receive")
    assert [(m["name"], m["text"]) for m in r.lines()] == [("alice", "from alice")]
    refusals = bob.ok("quarantine", "--json").lines()
    assert len(refusals) == 2 and "Traceback" not in r.err


@pytest.mark.own_relay
def test_a_follower_killed_between_hand_over_and_commit_loses_nothing_and_delivers_once(
        pair: tuple[Agent, Agent], relay: RelayProcess) -> None:
    alice, bob = pair
    bob_fp = bob.ok("id", "--json").json()["fingerprint"]
    alice_fp = alice.ok("id", "--json").json()["fingerprint"]
    page = [sent(alice, "alice", f"handed over in one page, then killed: {n}", "bob") for n in range(3)]
    child = subprocess.run([sys.executable, "-c", KILLED_AFTER_HAND_OVER], env=bob.env(),
                           capture_output=True, text=True, timeout=120)
    assert child.returncode == -signal.SIGKILL, child.stderr
    state = bob.home / "bob" / SESSIONS_DIR / f"{alice_fp}.json"

    def committed() -> list[str]:
        return [i for i in page if i in stored_state(state)["seen"]]

    assert spooled_ids(bob, "bob") == page and waiting(relay, bob_fp) == 3 and committed() == []
    r = bob.ok("receive")  # opens them again from the uncommitted state, knows them, commits, acks
    assert r.lines() == [] and waiting(relay, bob_fp) == 0 and committed() == page
    later = sent(alice, "alice", "the session went on", "bob")
    assert [m["id"] for m in bob.ok("receive").lines()] == [later]
    assert spooled_ids(bob, "bob") == page


DRAIN_ONCE = """
from follower.daemon.daemon import Follower
from talk.context import open_account

follower = Follower(open_account(None, None, None))
follower.config.every = True
follower.drain()
"""


@pytest.mark.own_relay
def test_a_follower_page_that_holds_a_session_ends_before_a_receipt_that_needs_it(
        pair: tuple[Agent, Agent], relay: RelayProcess) -> None:
    """One fetch brings alice bob's pre-key message (its page then holds her sessions with bob
    and her account) and bob's refusal receipt ("not opened": he holds a session with her, the
    one he just began, but none that opens it), whose answer must start a new session with
    bob: taken in the same page it would wait for the page's own locks forever. The page ends
    before it; the next takes it, and everything arrives once."""
    alice, bob = pair
    alice_fp = alice.ok("id", "--json").json()["fingerprint"]
    sent(bob, "bob", "in alice's session", "alice")
    assert texts(alice) == ["in alice's session"]
    for path in (bob.home / "bob" / SESSIONS_DIR).iterdir():
        path.unlink()  # bob's session state is lost
    lost = sent(alice, "alice", "into the lost session", "bob")
    first = sent(bob, "bob", "in bob's new session", "alice")  # a pre-key message on her key
    r = bob.ok("receive")  # refuses alice's message and tells her at once
    assert r.lines() == [] and f": {UNOPENED}: " in bob.ok("quarantine").out
    assert waiting(relay, alice_fp) == 2  # bob's message, then his receipt: one page
    child = subprocess.run([sys.executable, "-c", DRAIN_ONCE], env=alice.env(), capture_output=True,
                           text=True, timeout=120)
    assert child.returncode == 0, child.stderr
    assert spooled_ids(alice, "alice") == [first] and waiting(relay, alice_fp) == 0
    entry = Outbox(alice.home / "alice").entries()[lost]
    assert entry.recovered and entry.state == "stored"  # sent again, in a new session
    assert [(m["id"], m["text"]) for m in bob.ok("receive").lines()] == [(lost, "into the lost session")]


def test_verify_shows_the_ratchet_card_the_pinned_key_vouches_for(
        pair: tuple[Agent, Agent], relay: RelayProcess, tmp_path: Path) -> None:
    alice, bob = pair
    carol = old_format(tmp_path, relay, "carol")
    befriend(alice, carol)
    r = alice.ok("verify", "carol", "--json").json()
    assert (r["forward_secrecy"], r["ratchet_card"]) == (False, None)
    assert "forward secrecy: no" in alice.ok("verify", "carol").out
    sent(alice, "alice", "hello", "bob")
    me = unlocked(bob, "bob")
    own = card_for(RatchetAccount(bob.home / "bob", me).read(), me).to_json()
    r = alice.ok("verify", "bob", "--json").json()
    assert r["forward_secrecy"] is True
    assert r["ratchet_card"] == {"curve25519": own["curve25519"], "ed25519": own["ed25519"]}
    shown = "forward secrecy: yes; ratchet identity keys, signed by the pinned key:\n  curve25519 "
    assert shown + own["curve25519"] in alice.ok("verify", "bob").out
    assert texts(bob) == ["hello"]
    assert bob.ok("verify", "alice", "--json").json()["forward_secrecy"] is True  # from her pre-key message
    path = alice.home / "alice" / SESSIONS_DIR / f"{me.fingerprint}.json"
    stored = stored_state(path)
    stored["card"]["curve25519"] = b64e(bytes(32 * [7]))  # a card the pinned key never signed
    path.write_text(json.dumps(stored))
    r = alice.run("verify", "bob")
    assert r.code != 0 and "PIN MISMATCH" in r.err and "Traceback" not in r.err


@pytest.mark.own_relay
def test_followers_on_both_sides_re_establish_a_lost_session_and_deliver_once(
        pair: tuple[Agent, Agent], relay: RelayProcess) -> None:
    alice, bob = pair
    bob_fp = bob.ok("id", "--json").json()["fingerprint"]
    alice.ok("follow", "--peer", "bob")
    bob.ok("follow", "--peer", "alice")
    try:
        first = sent(alice, "alice", "first", "bob")
        wait_for(lambda: spool_ids(bob, "bob")[first] == 1, 20, "the first message")
        reply = sent(bob, "bob", "reply", "alice")
        wait_for(lambda: spool_ids(alice, "alice")[reply] == 1, 20, "the reply")
        shutil.rmtree(bob.home / "bob" / SESSIONS_DIR)  # bob's session state is lost, his follower runs on
        lost = sent(alice, "alice", "into the lost session", "bob")
        # Bob's follower refuses it, alice's takes the refusal and sends it again in a new session.
        wait_for(lambda: spool_ids(bob, "bob")[lost] == 1, 30, "the message, sent again")
        wait_for(lambda: Outbox(alice.home / "alice").entries()[lost].state == "spooled", 30,
                 "bob's receipt for the message sent again")
        assert Outbox(alice.home / "alice").entries()[lost].recovered
        assert "no session" in bob.ok("quarantine").out
        assert [q["recovered"] for q in bob.ok("quarantine", "--json").lines()] == [True]
        assert bob.ok("status", "--json").json()["quarantined"] == 0
        assert_both_see_it_reestablished(alice, bob)
        later = sent(alice, "alice", "in the new session", "bob")
        wait_for(lambda: spool_ids(bob, "bob")[later] == 1, 20, "the next message")
        wait_for(lambda: waiting(relay, bob_fp) == 0, 20, "bob's follower to ack it")
        assert spool_ids(bob, "bob") == Counter([first, lost, later])  # each exactly once, anywhere
        assert spooled_ids(bob, "bob") == [first, lost, later]
    finally:
        alice.run("stop")
        bob.run("stop")


def own_card(agent: Agent, name: str) -> dict[str, Any]:
    """The ratchet card `agent` publishes, signed by its own key."""
    me = unlocked(agent, name)
    return card_for(RatchetAccount(agent.home / name, me).read(), me).to_json()


def card_keys(agent: Agent, name: str) -> dict[str, str]:
    """The ratchet identity keys `agent` published, as `talk verify --json` shows them."""
    own = own_card(agent, name)
    return {"curve25519": own["curve25519"], "ed25519": own["ed25519"]}


def trust_log(agent: Agent, name: str) -> bytes:
    path = agent.home / name / "trust.log"
    return path.read_bytes() if path.exists() else b""


def one_time_left(relay: RelayProcess, fp: str) -> int:
    with sqlite3.connect(relay.db) as db:
        return int(db.execute("SELECT COUNT(*) FROM ratchet_keys WHERE fp = ?", (fp,)).fetchone()[0])


def serve_card(relay: RelayProcess, fp: str, card: dict[str, Any]) -> None:
    with sqlite3.connect(relay.db) as db:
        db.execute("UPDATE ratchet_cards SET card = ? WHERE fp = ?", (json.dumps(card), fp))


def added(tmp_path: Path, relay: RelayProcess) -> tuple[Agent, Agent, str]:
    """alice, who pinned bob by his fingerprint (no mail yet, so no session), bob, his fingerprint."""
    alice, bob = (make_agent(tmp_path, relay, name, None) for name in ("alice", "bob"))
    bob_fp: str = bob.ok("id", "--json").json()["fingerprint"]
    alice.ok("add", bob_fp, "--name", "bob")
    assert not (alice.home / "alice" / SESSIONS_DIR / f"{bob_fp}.json").exists()
    return alice, bob, bob_fp


@pytest.mark.own_relay
def test_verify_before_any_session_shows_the_card_on_the_relay_and_takes_no_key(
        tmp_path: Path, relay: RelayProcess) -> None:
    alice, bob, bob_fp = added(tmp_path, relay)
    left = one_time_left(relay, bob_fp)
    r = alice.ok("verify", "bob", "--json").json()
    assert (r["forward_secrecy"], r["ratchet_card_from"], r["ratchet_card_error"]) == (False, "relay", None)
    assert r["ratchet_card"] == card_keys(bob, "bob")
    shown = alice.ok("verify", "bob").out
    assert "forward secrecy: not yet" in shown and "signed by the pinned key" in shown
    assert "curve25519 " + card_keys(bob, "bob")["curve25519"] in shown
    assert one_time_left(relay, bob_fp) == left  # reading the card claimed nothing
    assert not (alice.home / "alice" / SESSIONS_DIR / f"{bob_fp}.json").exists()
    sent(alice, "alice", "now a session", "bob")
    assert alice.ok("verify", "bob", "--json").json()["ratchet_card_from"] == "session"


@pytest.mark.own_relay
def test_a_relay_serving_a_forged_card_fails_verify_with_a_pin_mismatch(
        relay: RelayProcess, tmp_path: Path) -> None:
    alice, bob, bob_fp = added(tmp_path, relay)
    mallory = Agent(tmp_path / "home-mallory", relay.url)
    mallory.ok("init", "mallory", "--no-passphrase")
    genuine, own = own_card(bob, "bob"), own_card(mallory, "mallory")
    trust = trust_log(alice, "alice")
    for forged in (
        {**genuine, "curve25519": b64e(bytes(32 * [7]))},  # bob's card with the relay's own key in it
        own,  # a card genuinely signed, by another identity
        {**own, "fp": bob_fp},  # that card relabelled as bob's
    ):
        serve_card(relay, bob_fp, forged)
        r = alice.run("verify", "bob")
        assert r.code == 2 and "PIN MISMATCH" in r.err and "Traceback" not in r.err, r.err
        assert r.out == "" and len(r.err.strip().splitlines()) == 1
    assert trust_log(alice, "alice") == trust  # no check recorded
    serve_card(relay, bob_fp, genuine)
    assert alice.ok("verify", "bob", "--json").json()["ratchet_card_from"] == "relay"


# A relay as it was before it served cards alone: the same relay with that one route taken out.
RELAY_WITHOUT_CARD_ROUTE = """
import sys
import relay.app
every = relay.app.routes
relay.app.routes = lambda r: [x for x in every(r) if not getattr(x, "path", "").endswith("/card")]
from talk.__main__ import main
main(sys.argv[1:])
"""


class RelayWithoutCardRoute(RelayProcess):
    def command(self) -> list[str]:
        return [sys.executable, "-c", RELAY_WITHOUT_CARD_ROUTE, *super().command()[1:]]


def test_verify_on_a_relay_without_the_card_route_still_verifies_and_says_so(tmp_path: Path) -> None:
    relay = RelayWithoutCardRoute(tmp_path / "old.db", free_port()).start()
    try:
        alice, bob, _ = added(tmp_path, relay)
        r = alice.ok("verify", "bob", "--json").json()
        assert (r["forward_secrecy"], r["ratchet_card"], r["ratchet_card_from"]) == (False, None, None)
        assert "404" in r["ratchet_card_error"] or "no such route" in r["ratchet_card_error"]
        assert r["verified_at"] is not None and r["safety_number"]
        shown = alice.ok("verify", "bob").out
        assert "could not be read from the relay" in shown and "safety number" in shown
        bob.ok("add", alice.ok("id", "--json").json()["fingerprint"], "--name", "alice")
        msg_id = sent(alice, "alice", "sessions need no card route", "bob")
        assert "olm" in opened(alice, "alice", msg_id, bob, "bob").extra
        assert alice.ok("verify", "bob", "--json").json()["ratchet_card_from"] == "session"
    finally:
        relay.stop()


def relay_blobs(relay: RelayProcess, fp: str) -> list[bytes]:
    with sqlite3.connect(relay.db) as db:
        return [bytes(row[0]) for row in db.execute("SELECT blob FROM mail WHERE fp = ? ORDER BY id", (fp,))]


def pipes(folder: str, names: list[str]) -> list[str]:
    """A follower's doorbell is a named pipe, its key agent a socket: a copy of the files has no
    use for them (and cannot read them)."""
    def special(name: str) -> bool:
        mode = os.lstat(os.path.join(folder, name)).st_mode
        return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)

    return [n for n in names if special(n)]


class Thief:
    """Whoever took a copy of an identity's whole folder (key file, Olm account, sessions) and
    its passphrase file as they were at one moment, with talk's own code to use on them."""

    def __init__(self, agent: Agent, name: str, copy: Path) -> None:
        shutil.copytree(agent.home / name, copy, ignore=pipes)
        assert agent.passphrase_file is not None
        self.folder = copy
        passphrase = keystore.read_passphrase_file(str(agent.passphrase_file))
        self.me = keystore.unlock(keystore.load(copy), passphrase)
        self.book = ContactBook(copy)
        self.store = RatchetSessions(RatchetAccount(copy, self.me))

    def unseal(self, blob: bytes) -> tuple[Contact, Inner]:
        """The long-term seal opens (the thief holds both its secrets): it is the Olm message
        inside that must not."""
        return open_blob(blob, self.me.box_secret, self.me.fingerprint, self.book.with_box_key,
                         lambda c: c.fingerprint, self.me.kem_seed)

    def curve(self, contact: Contact, card: dict[str, Any] | None) -> bytes:
        stored = stored_state(self.folder / SESSIONS_DIR / f"{contact.fingerprint}.json")["card"]
        return verify_card(card or stored, contact.fingerprint, contact.sign_key).curve25519

    def receive_path(self, blob: bytes, msg_id: str) -> str:
        """What talk's receive makes of the blob under `msg_id`, in a page of its own: the text,
        or the refusal it raises."""
        contact, outer = self.unseal(blob)
        part = olm_part(outer)
        with self.store.page() as page:
            curve = self.curve(contact, part.card)
            opened = page.open(contact.fingerprint, curve, msg_id, part.message, part.card)
        return "(duplicate)" if opened.duplicate else unwrap(outer, opened.plaintext).text


@pytest.mark.own_relay
def test_a_stolen_current_key_folder_cannot_open_earlier_mail_the_relay_kept(
        relay: RelayProcess, tmp_path: Path) -> None:
    """Alice writes to bob (whose keys are under a passphrase) in the session her acceptance of
    his join started on one of his one-time keys: two pre-key messages, then, once he answered,
    two more in the session. The relay's copies are kept. After bob took them all, a thief gets
    his whole folder and passphrase, and every way talk's code offers to open each kept blob
    fails on the Olm message."""
    alice = make_agent(tmp_path, relay, "alice", None)
    bob = make_agent(tmp_path, relay, "bob", "a passphrase only bob knows")
    bob_fp = bob.ok("id", "--json").json()["fingerprint"]
    published = one_time_left(relay, bob_fp)
    befriend(alice, bob)
    assert one_time_left(relay, bob_fp) == published - 1  # alice's claim took one
    ids = [sent(alice, "alice", f"{n}, a pre-key message", "bob") for n in ("first", "second")]
    held = relay_blobs(relay, bob_fp)
    assert texts(bob) == ["first, a pre-key message", "second, a pre-key message"]
    sent(bob, "bob", "got them", "alice")
    assert texts(alice) == ["got them"]
    ids += [sent(alice, "alice", f"{n}, in the session", "bob") for n in ("third", "fourth")]
    held += relay_blobs(relay, bob_fp)
    assert len(texts(bob)) == 2
    outbox = Outbox(alice.home / "alice").entries()
    kept = {msg_id: b64d(outbox[msg_id].blob) for msg_id in ids}
    assert all(blob in held for blob in kept.values())  # byte for byte what the relay served
    assert [opened(alice, "alice", i, bob, "bob").extra["olm"]["type"] for i in ids] == [0, 0, 1, 1]

    thief = Thief(bob, "bob", tmp_path / "stolen")
    alice_fp = alice.ok("id", "--json").json()["fingerprint"]
    path = thief.folder / SESSIONS_DIR / f"{alice_fp}.json"
    stored = stored_state(path)
    sessions = [vodozemac.Session.from_pickle(p, thief.store.account.pickle_key) for p in stored["sessions"]]
    account = thief.store.account.read()
    for n, (msg_id, blob) in enumerate(kept.items()):
        contact, outer = thief.unseal(blob)  # the seal is long-term: it opens
        assert contact.name == "alice" and outer.id == msg_id and outer.text == ""
        part = olm_part(outer)
        assert thief.receive_path(blob, msg_id) == "(duplicate)"  # its own id: known, not even tried
        with pytest.raises(Unopened) as refused:  # under an id never seen: tried, and refused
            thief.receive_path(blob, f"{n:032x}")
        assert "key was used already" in str(refused.value)  # its session is held, its key gone
        for session in sessions:  # each session bob holds now, tried directly
            with pytest.raises(ValueError, match=r"can't be created|invalid MAC"):
                session.decrypt(part.message)
        pre_key = part.message.to_pre_key()
        if pre_key is not None:  # a new inbound session from the account: its one-time key is gone
            curve = vodozemac.Curve25519PublicKey.from_bytes(thief.curve(contact, part.card))
            with pytest.raises(ValueError, match="unknown one-time key"):
                account.create_inbound_session(curve, pre_key)

    # And talk itself, run on the stolen copy with its memory of these ids wiped, the relay
    # serving the kept blobs again: each is refused, opened by no state held, nothing printed.
    path.write_text(json.dumps({**stored, "seen": []}))
    (thief.folder / "channels.db").unlink()
    with RelayClient(relay.url) as client:
        for msg_id, blob in kept.items():
            client.deposit(bob_fp, outbox[msg_id].tag, blob)
    home = tmp_path / "stolen-home"
    home.mkdir()
    shutil.move(thief.folder, home / "bob")
    stolen = Agent(home, relay.url, bob.passphrase_file)
    r = stolen.ok("receive")
    assert r.lines() == [] and "Traceback" not in r.err
    refusals = stolen.ok("quarantine", "--json").lines()
    assert len(refusals) == 4 and all(f'"{UNOPENED}: ' in json.dumps(q) for q in refusals)


def fallback_on_relay(relay: RelayProcess, fp: str) -> str:
    with sqlite3.connect(relay.db) as db:
        return str(db.execute("SELECT fallback FROM ratchet_cards WHERE fp = ?", (fp,)).fetchone()[0])


@pytest.mark.own_relay
def test_a_pre_key_message_on_the_fallback_key_opens_with_a_stolen_account_until_it_is_rotated_twice(
        relay: RelayProcess, tmp_path: Path) -> None:
    """The limit the README names. With no one-time key of bob's left, alice's new session
    starts on his fallback key, which a use does not spend: a thief with bob's folder opens
    that pre-key message again after bob did. Each follower start makes a new fallback key,
    and the account still answers to the one before it, so it takes two starts (two
    rotations) before the stolen account refuses it."""
    alice = make_agent(tmp_path, relay, "alice", None)
    bob = make_agent(tmp_path, relay, "bob", "a passphrase only bob knows")
    befriend(alice, bob)
    bob_fp = bob.ok("id", "--json").json()["fingerprint"]
    (alice.home / "alice" / SESSIONS_DIR / f"{bob_fp}.json").unlink()  # so she claims a key anew
    with sqlite3.connect(relay.db) as db:  # every one-time key of bob's was claimed
        db.execute("DELETE FROM ratchet_keys WHERE fp = ?", (bob_fp,))
    msg_id = sent(alice, "alice", "on the fallback key", "bob")
    blob = b64d(Outbox(alice.home / "alice").entries()[msg_id].blob)
    assert opened(alice, "alice", msg_id, bob, "bob").extra["olm"]["type"] == 0
    assert texts(bob) == ["on the fallback key"]

    def rotate() -> None:
        before = fallback_on_relay(relay, bob_fp)
        bob.ok("follow")
        wait_for(lambda: fallback_on_relay(relay, bob_fp) != before, 60, "a new fallback key on the relay")
        bob.ok("stop")

    alice_fp = alice.ok("id", "--json").json()["fingerprint"]

    def stolen(n: int) -> Thief:
        """A copy whose session with alice is set aside: the session that took the message
        refuses it again (its key is used), but the account may start a new one from it."""
        thief = Thief(bob, "bob", tmp_path / f"stolen-{n}")
        path = thief.folder / SESSIONS_DIR / f"{alice_fp}.json"
        path.write_text(json.dumps({**stored_state(path), "sessions": [], "chains": {}}))
        return thief

    assert stolen(0).receive_path(blob, "0" * 32) == "on the fallback key"
    rotate()
    assert stolen(1).receive_path(blob, "1" * 32) == "on the fallback key"
    rotate()
    with pytest.raises(TamperedMessage, match="starts no session"):
        stolen(2).receive_path(blob, "2" * 32)


def record_deposits(relay: RelayProcess) -> None:
    """From now on the relay keeps a copy of every blob deposited, as a relay an attacker holds
    would, whatever becomes of the mail itself."""
    with sqlite3.connect(relay.db) as db:
        db.executescript("""
            CREATE TABLE recorded (fp TEXT NOT NULL, blob BLOB NOT NULL);
            CREATE TRIGGER record_deposit AFTER INSERT ON mail
            BEGIN INSERT INTO recorded VALUES (new.fp, new.blob); END;
        """)


def recorded(relay: RelayProcess, fp: str) -> list[bytes]:
    with sqlite3.connect(relay.db) as db:
        rows = db.execute("SELECT blob FROM recorded WHERE fp = ? ORDER BY rowid", (fp,))
        return [bytes(r[0]) for r in rows]


# Every base64 run long enough to be a pickle or a sealed box, wherever it lies in a file: in
# either slot of a session file, whole or torn, in a log line erased or not, in a temporary file.
PICKLE_LIKE = re.compile(rb"[A-Za-z0-9+/]{120,}={0,2}")


class FolderThief(Thief):
    """A thief who reads every byte of every file in the copy, not only what talk would read:
    any Olm state found anywhere is tried, and any in-flight record opened."""

    def states(self) -> tuple[list[vodozemac.Session], list[vodozemac.Account], list[bytes]]:
        """(sessions, accounts, opened in-flight records) found anywhere in the copy."""
        key = self.store.account.pickle_key
        inflight = secret.SecretBox(hashlib.blake2b(INFLIGHT_CONTEXT, key=self.me.secret_bytes(),
                                                    digest_size=32).digest())
        sessions, accounts, records = [], [], []
        for path in sorted(p for p in self.folder.rglob("*") if p.is_file()):
            for run in set(PICKLE_LIKE.findall(path.read_bytes())):
                text = run.decode().rstrip("=")
                with contextlib.suppress(ValueError):  # vodozemac's refusal
                    sessions.append(vodozemac.Session.from_pickle(text, key))
                    continue
                with contextlib.suppress(ValueError):
                    accounts.append(vodozemac.Account.from_pickle(text, key))
                    continue
                with contextlib.suppress(CryptoError, ValueError):
                    records.append(inflight.decrypt(base64.b64decode(run)))
        return sessions, accounts, records

    def carries_olm(self, blob: bytes) -> bool:
        return OLM_FIELD in self.unseal(blob)[1].extra  # not a receipt, which rides no session

    def opens(self, blob: bytes) -> list[str]:
        """How the copy opens the Olm message in `blob`: the way for each state that does."""
        contact, outer = self.unseal(blob)
        part = olm_part(outer)
        sessions, accounts, records = self.states()
        ways = []
        for n, session in enumerate(sessions):
            with contextlib.suppress(ValueError):
                session.decrypt(part.message)
                ways.append(f"session {n}")
        pre_key = part.message.to_pre_key()
        curve = vodozemac.Curve25519PublicKey.from_bytes(self.curve(contact, part.card))
        for n, account in enumerate(accounts):
            with contextlib.suppress(ValueError):
                if pre_key is not None:
                    account.create_inbound_session(curve, pre_key)
                    ways.append(f"account {n}")
        return ways + [f"in-flight record {n}" for n, r in enumerate(records) if outer.id.encode() in r]


@pytest.mark.own_relay
def test_a_folder_copied_right_after_receive_opens_none_of_the_mail_it_took(
        relay: RelayProcess, tmp_path: Path) -> None:
    """The relay records every blob; bob (under a passphrase) takes alice's mail with `talk
    receive`, two pre-key messages, then two in the session once he answered. A copy of his
    folder taken just before each receive opens that mail (so the thief's search works); one
    taken right after opens none of it, by any state in either slot of any file, any account,
    or any in-flight record. Alice's own copies are gone once the receipts came."""
    record_deposits(relay)
    alice = make_agent(tmp_path, relay, "alice", None)
    bob = make_agent(tmp_path, relay, "bob", "a passphrase only bob knows")
    bob_fp = bob.ok("id", "--json").json()["fingerprint"]
    befriend(alice, bob)
    copies = iter(range(100))

    def taken(texts_sent: list[str]) -> None:
        ids = [sent(alice, "alice", t, "bob") for t in texts_sent]
        blobs = recorded(relay, bob_fp)[-len(ids):]
        before = FolderThief(bob, "bob", tmp_path / f"copy-{next(copies)}")
        assert all(before.opens(b) for b in blobs)  # before the receive: each opens
        assert texts(bob) == texts_sent
        after = FolderThief(bob, "bob", tmp_path / f"copy-{next(copies)}")
        mail = [b for b in recorded(relay, bob_fp) if after.carries_olm(b)]
        assert blobs == mail[-len(ids):]
        for blob in mail:
            assert after.opens(blob) == []

    taken(["first, a pre-key message", "second, a pre-key message"])
    sent(bob, "bob", "got them", "alice")
    assert texts(alice) == ["got them"]
    taken(["third, in the session", "fourth, in the session"])
    ids = list(Outbox(alice.home / "alice").entries())
    alice.ok("receive")  # takes bob's receipts: her messages settled
    assert all(Outbox(alice.home / "alice").entries()[i].state == "delivered" for i in ids if i)
    kept = (alice.home / "alice" / INFLIGHT_FILE).read_bytes()
    assert not any(i.encode() in kept for i in ids)


@pytest.mark.own_relay
def test_a_folder_copied_right_after_a_follower_page_opens_none_of_it(
        relay: RelayProcess, tmp_path: Path) -> None:
    record_deposits(relay)
    alice = make_agent(tmp_path, relay, "alice", None)
    bob = make_agent(tmp_path, relay, "bob", "a passphrase only bob knows")
    bob_fp = bob.ok("id", "--json").json()["fingerprint"]
    befriend(alice, bob)
    bob.ok("follow", "--peer", "alice")
    try:
        ids = [sent(alice, "alice", f"to the follower: {n}", "bob") for n in range(3)]
        wait_for(lambda: all(spool_ids(bob, "bob")[i] == 1 for i in ids), 30, "the spooled page")
        wait_for(lambda: waiting(relay, bob_fp) == 0, 30, "the follower's ack")
        thief = FolderThief(bob, "bob", tmp_path / "copy")
        blobs = [b for b in recorded(relay, bob_fp) if thief.carries_olm(b)]
        assert len(blobs) == 4  # the three, and the note saying bob was accepted
        for blob in blobs:
            assert thief.opens(blob) == []
    finally:
        bob.run("stop")


@pytest.mark.own_relay
def test_a_relay_holding_a_stolen_folder_cannot_have_mail_that_arrived_sent_again(
        relay: RelayProcess, tmp_path: Path) -> None:
    """A thief with bob's folder (passphrase too) and the relay answers in bob's name that he
    lost the session of four messages: one he took, one he took whose receipt the relay kept
    from alice (the forged receipt says it was delivered, and refused), one the relay kept from
    him until it was older than the resend window, one it kept from him a moment ago. Only the
    last comes back (its receiver may truly have lost the session), and alice's outbox says of
    each only what happened."""
    record_deposits(relay)
    alice = make_agent(tmp_path, relay, "alice", None)
    bob = make_agent(tmp_path, relay, "bob", "a passphrase only bob knows")
    bob_fp, alice_fp = (a.ok("id", "--json").json()["fingerprint"] for a in (bob, alice))
    befriend(alice, bob)
    taken = sent(alice, "alice", "taken by bob", "bob")
    assert texts(bob) == ["taken by bob"]
    alice.ok("receive")  # bob's receipt
    crossed = sent(alice, "alice", "taken by bob, the receipt kept from alice", "bob")
    assert texts(bob) == ["taken by bob, the receipt kept from alice"]
    with sqlite3.connect(relay.db) as db:  # the relay keeps bob's receipt from alice
        db.execute("DELETE FROM mail WHERE fp = ?", (alice_fp,))
    late, fresh = (sent(alice, "alice", text, "bob") for text in ("kept from bob, long ago", "kept from bob"))
    with sqlite3.connect(relay.db) as db:  # the relay keeps them from bob
        db.execute("DELETE FROM mail WHERE fp = ?", (bob_fp,))
    kept = alice.home / "alice" / INFLIGHT_FILE
    kept.write_bytes(json_lines([{**r, "at": r["at"] - RESEND_WINDOW_S - 60} if r.get("id") == late else r
                                 for r in read_records(kept)]))  # as if the window had passed since
    thief = FolderThief(bob, "bob", tmp_path / "copy")
    deposits = len(recorded(relay, bob_fp))
    lost = "no session: no ratchet session with this peer opens the message"
    with RelayClient(relay.url) as client:
        refusals = [{"ref": i, "state": "refused", "reason": lost} for i in (taken, crossed, late, fresh)]
        items = [{"ref": crossed, "state": "delivered", "reason": ""}, *refusals]
        assert deposit(client, seal_receipts(thief.me, thief.book.get("alice"), items)) == 0
    alice.ok("receive")
    entries = Outbox(alice.home / "alice").entries()
    for arrived in (taken, crossed):
        assert (entries[arrived].state, entries[arrived].recovered) == ("delivered", 0.0)
    assert (entries[late].state, entries[late].recovered, entries[late].reason) == ("refused", 0.0, lost)
    assert entries[fresh].state == "stored" and entries[fresh].recovered  # sent again, and says so
    [again] = recorded(relay, bob_fp)[deposits:]  # the fresh one only
    assert thief.unseal(again)[1].id == fresh and thief.opens(again) != []  # the limit the README names
    assert all(i.encode() not in kept.read_bytes() for i in (taken, crossed, late))
