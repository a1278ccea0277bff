"""End to end: real `talk` processes, each in its own TALK_HOME, through a real relay."""

from __future__ import annotations

import json
import sqlite3
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from follower.relay.client import RelayClient
from follower.send.upload import MOST_TEXT
from keys import keystore
from keys.envelope import new_message, seal
from keys.sodium import PublicKey
from tests.conftest import Agent, RelayClock, RelayProcess, befriend, free_port, make_agent, wait_for
from tests.faults import DyingProxy


def relay_bytes(relay: RelayProcess) -> bytes:
    parts = [relay.db, relay.db.with_name(relay.db.name + "-wal")]
    return b"".join(p.read_bytes() for p in parts if p.exists())


def mail_rows(relay: RelayProcess, fp: str | None = None) -> list[tuple[str, str, bytes]]:
    """The mail on the relay, or only what waits in mailbox `fp` (receipts go to the sender's)."""
    with sqlite3.connect(relay.db) as db:
        rows = db.execute("SELECT fp, tag, blob FROM mail ORDER BY id").fetchall()
    return [r for r in rows if fp is None or r[0] == fp]


def fingerprint(agent: Agent) -> str:
    return str(agent.ok("id", "--json").json()["fingerprint"])


@pytest.mark.own_relay
def test_conversation_both_ways_leaves_nothing_readable_on_the_relay(
    pair: tuple[Agent, Agent], relay: RelayProcess
) -> None:
    alice, bob = pair
    secret_a, secret_b = "the launch code is 0451", "meet at the usual place"
    sent_a = alice.ok("send", "bob", secret_a, "--json").json()
    sent_b = bob.ok("send", "alice", "-", "--json", stdin=secret_b).json()
    assert sent_b["to"] == "alice"
    assert sent_a["to"] == "bob" and len(sent_a["id"]) == 32

    stored = relay_bytes(relay)
    for needle in (secret_a, secret_b, "launch", "usual place"):
        assert needle.encode() not in stored
    for sender in (fingerprint(alice), fingerprint(bob)):
        assert sender.encode() not in stored or _only_as_mailbox(relay, sender)
        assert bytes.fromhex(sender) not in stored
    assert len(mail_rows(relay)) == 2

    got_b = bob.ok("receive").lines()
    got_a = alice.ok("receive").lines()
    assert [(m["name"], m["text"], m["kind"]) for m in got_b] == [("alice", secret_a, "chat")]
    assert [(m["name"], m["text"]) for m in got_a] == [("bob", secret_b)]
    assert got_b[0]["id"] == sent_a["id"] and got_b[0]["from"] == fingerprint(alice)
    assert set(got_b[0]) >= {"id", "from", "name", "text", "ts", "kind"}
    # Alice's receive sent bob a receipt; his next receive takes it without printing anything.
    assert bob.ok("receive").out == ""
    assert mail_rows(relay) == []


def _only_as_mailbox(relay: RelayProcess, fp: str) -> bool:
    """A fingerprint may appear as a mailbox address or a key-directory entry, never as a sender."""
    with sqlite3.connect(relay.db) as db:
        senders = db.execute("SELECT COUNT(*) FROM mail WHERE blob LIKE ?", (f"%{fp}%",)).fetchone()
    return bool(senders[0] == 0)


@pytest.mark.own_relay
def test_relay_restart_keeps_undelivered_mail(pair: tuple[Agent, Agent], relay: RelayProcess) -> None:
    alice, bob = pair
    alice.ok("send", "bob", "survives a restart")
    relay.restart()
    assert [m["text"] for m in bob.ok("receive").lines()] == ["survives a restart"]


def test_undelivered_mail_expires(tmp_path: Path) -> None:
    clock = RelayClock(tmp_path / "relay-clock")
    relay = RelayProcess(tmp_path / "r.db", free_port(), ["--ttl", "60", "--purge-interval", "0.2"],
                         env=clock.env)
    relay.start()
    try:
        alice = make_agent(tmp_path, relay, "alice", None)
        bob = make_agent(tmp_path, relay, "bob", None)
        befriend(alice, bob)
        alice.ok("send", "bob", "short-lived")
        assert len(mail_rows(relay)) == 1
        clock.advance(61)  # past the TTL on the relay's clock; purges run every 0.2 s
        wait_for(lambda: mail_rows(relay) == [], 5, "the purge of expired mail")
        assert bob.ok("receive").out == ""
    finally:
        relay.stop()


@pytest.mark.own_relay
def test_tampered_ciphertext_is_refused_and_nothing_else_is_lost(
    pair: tuple[Agent, Agent], relay: RelayProcess
) -> None:
    alice, bob = pair
    alice.ok("send", "bob", "will be tampered")
    with sqlite3.connect(relay.db) as db:
        (row_id, blob) = db.execute("SELECT id, blob FROM mail").fetchone()
        flipped = bytearray(blob)
        flipped[40] ^= 0x01
        db.execute("UPDATE mail SET blob = ? WHERE id = ?", (bytes(flipped), row_id))
    alice.ok("send", "bob", "arrives intact")
    contacts_before = bob.ok("contacts", "--json").json()
    r = bob.run("receive")
    # What it could deliver, it delivered: exit 0, and stderr says what was quarantined.
    assert r.code == 0
    assert [m["text"] for m in r.lines()] == ["arrives intact"]
    assert "quarantined" in r.err and "tampered" in r.err and "Traceback" not in r.err
    assert r.err.strip().count("\n") == 0
    assert bob.ok("contacts", "--json").json() == contacts_before
    assert bob.ok("receive").out == ""


@pytest.mark.own_relay
def test_mail_from_an_unpinned_sender_is_never_shown(
    tmp_path: Path, pair: tuple[Agent, Agent], relay: RelayProcess
) -> None:
    alice, bob = pair
    carol = make_agent(tmp_path, relay, "carol", None)
    alice.ok("send", "bob", "from alice")
    ((bob_fp, tag, _),) = mail_rows(relay)
    # A stranger who learned the channel tag (the relay knows it) deposits there.
    carol_id = keystore.unlock(keystore.load(carol.home / "carol"), None)
    bob_box = PublicKey(bytes.fromhex(_box_key_hex(bob)))
    inner = new_message(carol_id.fingerprint, bob_fp, "do what I say")
    with RelayClient(relay.url) as client:
        client.deposit(bob_fp, tag, seal(inner, carol_id.box_secret, bob_box))
    r = bob.run("receive")
    assert r.code == 0
    assert [m["text"] for m in r.lines()] == ["from alice"]
    assert "do what I say" not in r.out + r.err
    assert "quarantined" in r.err and "unknown sender" in r.err
    assert mail_rows(relay, bob_fp) == []


def _box_key_hex(agent: Agent) -> str:
    import base64

    return base64.b64decode(agent.ok("id", "--json").json()["box_key"]).hex()


def _swap_bundle(relay: RelayProcess, victim_fp: str, impostor_fp: str) -> None:
    """Play a malicious relay: serve the impostor's keys under the victim's fingerprint."""
    with sqlite3.connect(relay.db) as db:
        (impostor,) = db.execute("SELECT bundle FROM bundles WHERE fp = ?", (impostor_fp,)).fetchone()
        db.execute("UPDATE bundles SET bundle = ? WHERE fp = ?", (impostor, victim_fp))


@pytest.mark.own_relay
def test_pin_mismatch_on_add_and_verify(
    tmp_path: Path, pair: tuple[Agent, Agent], relay: RelayProcess
) -> None:
    alice, bob = pair
    carol = make_agent(tmp_path, relay, "carol", None)
    dave = make_agent(tmp_path, relay, "dave", None)
    _swap_bundle(relay, fingerprint(dave), fingerprint(carol))
    _swap_bundle(relay, fingerprint(bob), fingerprint(carol))
    before = alice.ok("contacts", "--json").json()

    r = alice.run("add", fingerprint(dave), "--name", "dave")
    assert r.code == 2 and "PIN MISMATCH" in r.err and "Traceback" not in r.err
    r = alice.run("verify", "bob")
    assert r.code == 2 and "PIN MISMATCH" in r.err
    assert alice.ok("contacts", "--json").json() == before
    # Pinned keys are used for sending, so the swap cannot redirect mail either.
    alice.ok("send", "bob", "still for bob")
    relay_mail = mail_rows(relay)
    assert len(relay_mail) == 1 and relay_mail[0][0] == fingerprint(bob)


@pytest.mark.own_relay
def test_pin_mismatch_on_join_sends_nothing(
    tmp_path: Path, alice: Agent, bob: Agent, relay: RelayProcess
) -> None:
    carol = make_agent(tmp_path, relay, "carol", None)
    code = alice.ok("invite", "--json").json()["code"]
    with sqlite3.connect(relay.db) as db:
        (original,) = db.execute(
            "SELECT bundle FROM bundles WHERE fp = ?", (fingerprint(alice),)
        ).fetchone()
    _swap_bundle(relay, fingerprint(alice), fingerprint(carol))
    r = bob.run("join", code)
    assert r.code == 2 and "PIN MISMATCH" in r.err
    assert mail_rows(relay) == []
    assert bob.ok("contacts", "--json").json() == []
    with sqlite3.connect(relay.db) as db:
        db.execute("UPDATE bundles SET bundle = ? WHERE fp = ?", (original, fingerprint(alice)))
    bob.ok("join", code)  # the code was not spent by the refused attempt


@pytest.mark.own_relay
def test_oversize_message_is_refused_before_sending(
    pair: tuple[Agent, Agent], relay: RelayProcess
) -> None:
    alice, _ = pair
    r = alice.run("send", "bob", "-", stdin="x" * (MOST_TEXT + 1))  # a long text goes as a body, up to this
    assert r.code == 1 and "limit" in r.err and "Traceback" not in r.err
    assert mail_rows(relay) == []


def test_invite_codes_are_single_use_mortal_and_revocable(
    tmp_path: Path, alice: Agent, bob: Agent, relay: RelayProcess
) -> None:
    carol = make_agent(tmp_path, relay, "carol", None)
    befriend(alice, bob)
    used = alice.ok("invite", "list", "--json").json()[0]["code"]
    r = carol.run("join", used)
    assert r.code == 1 and "already used" in r.err

    revoked = alice.ok("invite", "--json").json()["code"]
    alice.ok("invite", "revoke", revoked)
    r = carol.run("join", revoked)
    assert r.code == 1 and "revoked" in r.err

    # 0.000001 days is 86 ms: the code's expiry, whole seconds, is at most that far ahead.
    short_invite = alice.ok("invite", "--expires", "0.000001", "--json").json()
    short = short_invite["code"]
    expires = datetime.strptime(short_invite["expires"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC).timestamp()
    wait_for(lambda: time.time() >= expires, 5, "the invite's expiry")
    r = carol.run("join", short)
    assert r.code == 1 and "expired" in r.err

    r = carol.run("join", "talk-notacode")
    assert r.code == 1 and "not a talk invite code" in r.err
    assert carol.ok("contacts", "--json").json() == []
    states = {i["code"]: i["state"] for i in alice.ok("invite", "list", "--json").json()}
    assert states == {used: "used", revoked: "revoked", short: "expired"}


def test_wrong_passphrase_is_a_clear_error(tmp_path: Path, pair: tuple[Agent, Agent]) -> None:
    alice, _ = pair
    ident = alice.home / "alice" / "identity.json"
    before = ident.read_bytes()
    wrong = tmp_path / "wrong.pass"
    wrong.write_text("not it\n")
    wrong.chmod(0o600)
    r = alice.run("send", "bob", "hi", "--passphrase-file", str(wrong))
    assert r.code == 1 and "wrong passphrase" in r.err and "Traceback" not in r.err
    assert ident.read_bytes() == before
    assert json.loads(before)["private"]["protection"] == "argon2id-secretbox"


@pytest.mark.own_relay
def test_relay_down_is_exit_3_for_receive_and_queued_for_send(
    pair: tuple[Agent, Agent], relay: RelayProcess
) -> None:
    alice, _ = pair
    relay.stop()
    r = alice.run("receive")
    assert r.code == 3 and "cannot reach the relay" in r.err and "Traceback" not in r.err
    # A send is kept and goes later (tests/test_send_contract.py): exit 0, and stderr says why.
    r = alice.run("send", "bob", "nobody home", "--json")
    assert r.code == 0 and r.json()["state"] == "queued" and "cannot reach the relay" in r.err


@pytest.mark.own_relay
def test_relay_dying_between_two_acks_loses_nothing_and_repeats_nothing(
    pair: tuple[Agent, Agent], relay: RelayProcess
) -> None:
    alice, bob = pair
    sent = [alice.ok("send", "bob", f"message {i}", "--json").json()["id"] for i in range(3)]
    acks = []

    def second_ack(request_line: str) -> bool:
        if "/ack " in request_line:
            acks.append(request_line)
        return len(acks) == 2

    proxy = DyingProxy(relay.port, second_ack)
    first = bob.run("receive", "--relay", proxy.url)
    assert first.code == 3 and "cannot reach the relay" in first.err
    shown_first = [m["id"] for m in first.lines()]
    assert shown_first == sent[:2]
    assert len(mail_rows(relay)) == 2  # the second message was shown but never acked

    second = bob.ok("receive")
    shown_second = [m["id"] for m in second.lines()]
    assert shown_second == sent[2:]
    assert mail_rows(relay, fingerprint(bob)) == []


def test_cards_and_contacts(pair: tuple[Agent, Agent]) -> None:
    alice, bob = pair
    card = alice.ok("id", "--json").json()
    assert set(card) == {"name", "fingerprint", "relay", "sign_key", "box_key"}
    contacts = bob.ok("contacts", "--json").json()
    assert [(c["name"], c["fingerprint"]) for c in contacts] == [("alice", card["fingerprint"])]
    safety_a = alice.ok("verify", "bob", "--json").json()["safety_number"]
    safety_b = bob.ok("verify", "alice", "--json").json()["safety_number"]
    assert safety_a == safety_b and len(safety_a.split()) == 12


def test_add_by_fingerprint_then_talk(tmp_path: Path, relay: RelayProcess) -> None:
    alice = make_agent(tmp_path, relay, "alice", None)
    bob = make_agent(tmp_path, relay, "bob", None)
    alice.ok("add", fingerprint(bob), "--name", "bob")
    bob.ok("add", fingerprint(alice), "--name", "alice")
    # A bare fingerprint vouches for nothing: alice's mail is held until bob checks or accepts her.
    alice.ok("send", "bob", "added by hand")
    r = bob.ok("receive", "--peer", "alice")
    assert r.out == "" and "held a message from alice" in r.err
    assert [h["text"] for h in bob.ok("held", "--json").json()] == ["added by hand"]
    bob.ok("verify", "alice", "--yes")  # checked and accepted: her next message is shown at once
    alice.ok("send", "bob", "after verify")
    assert [m["text"] for m in bob.ok("receive", "--peer", "alice").lines()] == ["after verify"]


def test_usage_errors_exit_1_without_traceback(alice: Agent) -> None:
    for args in (["send"], ["frobnicate"], ["send", "nobody", "hi"], ["add", "xyz", "--name", "x"]):
        r = alice.run(*args)
        assert r.code == 1, (args, r.err)
        assert "Traceback" not in r.err
