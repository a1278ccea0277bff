"""End to end: mail between identities with ML-KEM keys is sealed hybrid on a real relay; a
contact pinned before them is upgraded through its pinned signing key, out loud; a relay that
withholds the key only leaves "post-quantum: no"; the relay keeps only KEM keys their owner signed."""

from __future__ import annotations

import base64
import json
import sqlite3
from pathlib import Path

import pytest

from durable.errors import RelayError
from durable.home import IDENTITY_FILE
from follower.relay.client import RelayClient
from keys.envelope import CLASSIC_LENGTHS, HYBRID_LENGTHS, MAX_PADDED, OVERHEAD
from keys.identity import Identity
from tests.conftest import Agent, RelayProcess, befriend, free_port, make_agent
from tests.peer_forge import identity_of


def blob_lengths(relay: RelayProcess, fp: str) -> list[int]:
    with sqlite3.connect(relay.mailbox_db()) as db:
        rows = db.execute("SELECT blob FROM mail WHERE fp = ? ORDER BY id", (fp,)).fetchall()
    return [len(r[0]) for r in rows]


def contact_row(agent: Agent, name: str) -> dict[str, object]:
    rows = agent.ok("contacts", "--json").json()
    return next(r for r in rows if r["name"] == name)


def served_bundle(relay: RelayProcess, fp: str) -> dict[str, object]:
    with sqlite3.connect(relay.db) as db:
        (raw,) = db.execute("SELECT bundle FROM bundles WHERE fp = ?", (fp,)).fetchone()
    return dict(json.loads(raw))


def serve_bundle(relay: RelayProcess, fp: str, bundle: dict[str, object]) -> None:
    """What a hostile (or older) relay does: serve whatever it likes for `fp`."""
    with sqlite3.connect(relay.db) as db:
        db.execute("UPDATE bundles SET bundle = ? WHERE fp = ?", (json.dumps(bundle), fp))


def forget_kem(agent: Agent, peer: str) -> None:
    """`peer` as a contact pinned before KEM keys existed."""
    path = agent.home / agent.ok("id", "--json").json()["name"] / "contacts.json"
    book = json.loads(path.read_text())
    for key in ("kem_key", "kem_pinned_at", "kem_checked_at"):
        book[peer].pop(key, None)
    path.write_text(json.dumps(book))


@pytest.fixture
def friends(tmp_path: Path, relay: RelayProcess) -> tuple[Agent, Agent, str]:
    """alice and bob, contacts by invite, both without a passphrase; and bob's fingerprint."""
    alice, bob = make_agent(tmp_path, relay, "alice", None), make_agent(tmp_path, relay, "bob", None)
    befriend(alice, bob)
    return alice, bob, bob.ok("id", "--json").json()["fingerprint"]


@pytest.mark.own_relay
def test_two_identities_exchange_mail_sealed_hybrid(tmp_path: Path, relay: RelayProcess) -> None:
    alice = make_agent(tmp_path, relay, "alice", "a passphrase")
    bob = make_agent(tmp_path, relay, "bob", None)
    befriend(alice, bob)
    assert contact_row(alice, "bob")["post_quantum"] and contact_row(bob, "alice")["post_quantum"]
    assert "post-quantum: yes" in alice.ok("contacts").out
    alice_fp, bob_fp = (a.ok("id", "--json").json()["fingerprint"] for a in (alice, bob))

    sent = alice.ok("send", "bob", "sealed against tomorrow", "--json")
    assert sent.err == ""  # pinned at the invite: nothing to say
    lengths = blob_lengths(relay, bob_fp)
    assert lengths and all(n in HYBRID_LENGTHS for n in lengths)
    assert [m["text"] for m in bob.ok("receive").lines()] == ["sealed against tomorrow"]
    bob.ok("send", "alice", "and back")
    assert all(n in HYBRID_LENGTHS for n in blob_lengths(relay, alice_fp))
    got = alice.ok("receive").lines()
    assert [m["text"] for m in got if m["kind"] == "chat"] == ["and back"]


@pytest.mark.own_relay
def test_a_contact_pinned_before_is_upgraded_through_its_signing_key_and_says_so(
        friends: tuple[Agent, Agent, str], relay: RelayProcess) -> None:
    alice, bob, bob_fp = friends
    forget_kem(alice, "bob")
    real = served_bundle(relay, bob_fp)

    # A relay that withholds bob's KEM key: classic, as before, and "post-quantum: no".
    serve_bundle(relay, bob_fp, {k: v for k, v in real.items() if k != "kem"})
    withheld = alice.ok("send", "bob", "one")
    assert "post-quantum" not in withheld.err
    assert blob_lengths(relay, bob_fp)[-1] in CLASSIC_LENGTHS
    assert contact_row(alice, "bob")["post_quantum"] is False
    assert "post-quantum: no" in alice.ok("contacts").out

    # A forged one (bob's card with another key in it): refused, still no.
    forged = dict(real)
    card = dict(real["kem"])  # type: ignore[call-overload]
    key = bytearray(base64.b64decode(card["key"]))
    key[5] ^= 1
    forged["kem"] = {**card, "key": base64.b64encode(bytes(key)).decode()}
    serve_bundle(relay, bob_fp, forged)
    verified = alice.ok("verify", "bob")  # a refresh asks again now
    assert "post-quantum: no" in verified.out and "pinned the post-quantum key" not in verified.err
    assert contact_row(alice, "bob")["post_quantum"] is False

    # The relay serves the real one: the next refresh pins it, says so, and mail goes hybrid.
    serve_bundle(relay, bob_fp, real)
    alice_path = alice.home / "alice"
    path = alice_path / "contacts.json"
    book = json.loads(path.read_text())
    book["bob"].pop("kem_checked_at")  # as an hour later
    path.write_text(json.dumps(book))
    told = alice.ok("send", "bob", "two")
    assert "pinned the post-quantum key of bob" in told.err and len(told.err.strip().splitlines()) == 1
    assert blob_lengths(relay, bob_fp)[-1] in HYBRID_LENGTHS
    row = contact_row(alice, "bob")
    assert row["post_quantum"] is True and row["post_quantum_since"]
    trust = [json.loads(line) for line in (alice_path / "trust.log").read_text().splitlines()]
    assert any(e["action"] == "post-quantum key pinned" and e["fingerprint"] == bob_fp for e in trust)

    # Pinned for good: a relay that withholds it again changes nothing.
    serve_bundle(relay, bob_fp, {k: v for k, v in real.items() if k != "kem"})
    assert "post-quantum: yes" in alice.ok("verify", "bob").out
    again = alice.ok("send", "bob", "three")
    assert again.err == ""
    assert blob_lengths(relay, bob_fp)[-1] in HYBRID_LENGTHS
    assert [m["text"] for m in bob.ok("receive").lines() if m["kind"] == "chat"] == ["one", "two", "three"]


@pytest.mark.own_relay
def test_an_identity_from_before_kem_keys_publishes_one_and_its_contacts_pin_it(
        friends: tuple[Agent, Agent, str], relay: RelayProcess) -> None:
    alice, bob, bob_fp = friends
    # Bob as an older talk left him: 64 private bytes, a bundle without KEM key, pinned so.
    path = bob.home / "bob" / IDENTITY_FILE
    stored = json.loads(path.read_text())
    secret = base64.b64decode(stored["private"]["secret"])
    stored["private"]["secret"] = base64.b64encode(secret[:64]).decode()
    path.write_text(json.dumps(stored))
    serve_bundle(relay, bob_fp, {k: v for k, v in served_bundle(relay, bob_fp).items() if k != "kem"})
    forget_kem(alice, "bob")

    bob.ok("send", "alice", "upgraded")  # bob's first unlock adds his KEM key and publishes it
    upgraded = identity_of(bob.home, "bob")
    assert upgraded.kem_seed is not None
    assert "kem" in served_bundle(relay, bob_fp)
    told = alice.ok("send", "bob", "now hybrid")
    assert "pinned the post-quantum key of bob" in told.err
    assert blob_lengths(relay, bob_fp)[-1] in HYBRID_LENGTHS
    texts = [m["text"] for m in bob.ok("receive").lines() if m["kind"] == "chat"]
    assert texts == ["now hybrid"]


@pytest.mark.own_relay
def test_the_relay_keeps_only_kem_keys_their_owner_signed_and_none_can_strip_one(
        tmp_path: Path, relay: RelayProcess) -> None:
    owner, other = Identity.generate("owner"), Identity.generate("other")
    bundle = owner.bundle()
    assert bundle.kem is not None and other.bundle().kem is not None
    with RelayClient(relay.url) as client:
        with pytest.raises(RelayError) as refused:
            client.publish(bundle._replace(kem=other.bundle().kem))  # another identity's card
        assert refused.value.status == 400
        client.publish(bundle)
        client.publish(bundle._replace(kem=None))  # anyone may PUT a self-signed bundle again...
        assert client.bundle(owner.fingerprint).kem_key() == bundle.kem_key()  # ...but not strip it


def test_a_relay_older_than_hybrid_sealing_refuses_the_largest_bucket_and_nothing_goes_classic(
        tmp_path: Path) -> None:
    old_limit = MAX_PADDED + OVERHEAD  # an older relay's whole blob limit
    relay = RelayProcess(tmp_path / "relay.db", free_port(), ["--max-blob", str(old_limit)]).start()
    try:
        alice, bob = make_agent(tmp_path, relay, "alice", None), make_agent(tmp_path, relay, "bob", None)
        befriend(alice, bob)
        bob_fp = bob.ok("id", "--json").json()["fingerprint"]
        alice.ok("send", "bob", "short mail fits")
        # Inline (a longer text goes as a sealed body), in the largest bucket once in the ratchet.
        refused = alice.run("send", "bob", "-", stdin="x" * 30_000)
        assert refused.code == 3 and "predates post-quantum sealing" in refused.err
        assert len(refused.err.strip().splitlines()) == 1
        assert all(n in HYBRID_LENGTHS for n in blob_lengths(relay, bob_fp))  # no classic copy went instead
        assert [m["text"] for m in bob.ok("receive").lines()] == ["short mail fits"]
    finally:
        relay.stop()
