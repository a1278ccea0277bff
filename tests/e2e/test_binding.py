"""Keys bound to their owner, against a real relay and real `talk` processes.

mallory is a real identity whose keys a test helper reuses to craft what `talk` itself would
never send: a bundle self-signed by mallory's sign key around bob's box key, and contact
requests without, or with a wrong, proof of the box key. Whatever mallory tries, bob's mail
stays bob's and later joins and mail still flow.

`talk receive` exits 2 when it refused something; the refusal is what these tests look at, so
they also accept exit 0 (the one-line report on stderr is the contract either way).
"""

from __future__ import annotations

import base64
import dataclasses
import json
import secrets
import time
from pathlib import Path

from nacl.secret import SecretBox

from durable.files import read_json, write_json
from follower.relay.client import RelayClient
from keys import keystore
from keys.contacts import Contact, Source, pinned_contact
from keys.envelope import pad
from keys.identity import Identity, KeyBundle
from keys.invites import box_proof, new_code, parse_code, seal_request
from keys.sodium import PublicKey, SigningKey
from tests.conftest import Agent, RelayProcess, Result, befriend, make_agent


def identity_of(agent: Agent, name: str) -> Identity:
    """The agent's own keys, read from its TALK_HOME as `talk` reads them."""
    passphrase = None
    if agent.passphrase_file is not None:
        passphrase = keystore.read_passphrase_file(str(agent.passphrase_file))
    return keystore.unlock(keystore.load(agent.home / name), passphrase)


def box_key(agent: Agent) -> bytes:
    return base64.b64decode(agent.ok("id", "--json").json()["box_key"])


def fingerprint(agent: Agent) -> str:
    return str(agent.ok("id", "--json").json()["fingerprint"])


def borrowed_box_bundle(owner: Identity, box: bytes) -> KeyBundle:
    """Self-signed by `owner`, but around someone else's box key: what a relay would accept."""
    unsigned = KeyBundle(owner.name, owner.sign_public, box, b"\0" * 64)
    return unsigned._replace(signature=owner.sign(unsigned.signed_part()))


def redeem(relay: RelayProcess, code_text: str, blob: bytes) -> None:
    with RelayClient(relay.url) as client:
        client.redeem(parse_code(code_text).tag, blob)


def invite(inviter: Agent) -> str:
    return str(inviter.ok("invite", "--json").json()["code"])


def refused_receive(agent: Agent, *why: str) -> Result:
    """A `talk receive` that refused something: said so in one line each, without a traceback."""
    r = agent.run("receive")
    assert r.code in (0, 2), r.err
    assert "Traceback" not in r.err
    for words in why:
        assert words in r.err, r.err
    return r


def contact_names(agent: Agent) -> list[str]:
    return [c["name"] for c in agent.ok("contacts", "--json").json()]


def invite_state(agent: Agent, code_text: str) -> tuple[str, str | None]:
    """(state, used_by) of one of the agent's invites, as `talk invite list` shows it."""
    (row,) = [i for i in agent.ok("invite", "list", "--json").json() if i["code"] == code_text]
    return row["state"], row["used_by"]


@dataclasses.dataclass(frozen=True)
class CraftedOwner:
    """Owner auth for a crafted bundle's mailbox: its maker holds the sign key, so it may."""

    fingerprint: str
    signing_key: SigningKey

    def sign(self, message: bytes) -> bytes:
        return bytes(self.signing_key.sign(message).signature)


# ---------------------------------------------------------------- (a) a borrowed box key


def test_a_joiner_pairing_its_sign_key_with_bobs_box_key_is_refused(
    tmp_path: Path, pair: tuple[Agent, Agent], relay: RelayProcess
) -> None:
    alice, bob = pair
    mallory = identity_of(make_agent(tmp_path, relay, "mallory", None), "mallory")
    alice_box = PublicKey(box_key(alice))
    code_text = invite(alice)
    code = parse_code(code_text)
    crafted = borrowed_box_bundle(mallory, box_key(bob))
    assert crafted.self_signed()
    # The best proof mallory can make: with the box secret she has, not the one she claims.
    proof = box_proof(code, crafted, mallory.box_secret, alice_box)
    redeem(relay, code_text, seal_request(code, crafted, proof, secrets.token_hex(16)))

    r = refused_receive(alice, "refused", "does not hold", crafted.fingerprint)
    assert r.lines() == []  # no "joined" note, nothing an agent would read
    assert contact_names(alice) == ["bob"]
    assert invite_state(alice, code_text) == ("used", None)  # the relay let it through once

    bob.ok("send", "alice", "still mine")
    got = alice.ok("receive").lines()
    assert [(m["name"], m["text"], m["from"]) for m in got] == [("bob", "still mine", fingerprint(bob))]


# ---------------------------------------------------------------- (b) redeeming first


def test_a_joiner_first_with_bobs_box_key_cannot_take_bobs_later_mail(
    tmp_path: Path, alice: Agent, bob: Agent, relay: RelayProcess
) -> None:
    mallory = identity_of(make_agent(tmp_path, relay, "mallory", None), "mallory")
    code_text = invite(alice)
    code = parse_code(code_text)
    crafted = borrowed_box_bundle(mallory._replace(name="bob"), box_key(bob))
    proof = box_proof(code, crafted, mallory.box_secret, PublicKey(box_key(alice)))
    redeem(relay, code_text, seal_request(code, crafted, proof, secrets.token_hex(16)))
    refused_receive(alice, "does not hold")
    assert contact_names(alice) == []

    befriend(alice, bob)  # the real bob, later, with a code of his own
    assert contact_names(alice) == ["bob"]
    bob.ok("send", "alice", "for alice")
    got = alice.ok("receive").lines()
    assert [(m["name"], m["text"], m["from"]) for m in got] == [("bob", "for alice", fingerprint(bob))]


def test_a_relay_bundle_with_bobs_box_key_blocks_nothing_silently(
    tmp_path: Path, alice: Agent, bob: Agent, relay: RelayProcess
) -> None:
    """Keys on the relay cannot prove their box key (an X25519 key cannot sign). If alice pins
    mallory's bundle by fingerprint first, bob's later join is refused with a line naming the
    clash, and both sides are told; if bob came first, pinning mallory is refused."""
    mallory = identity_of(make_agent(tmp_path, relay, "mallory", None), "mallory")
    crafted = borrowed_box_bundle(mallory, box_key(bob))
    with RelayClient(relay.url) as client:
        client.publish(crafted)
    alice.ok("add", crafted.fingerprint, "--name", "mallory")

    bob.ok("join", invite(alice))
    r = refused_receive(alice, f"refused a contact request from {fingerprint(bob)}",
                        "box key is already pinned to your contact 'mallory'", crafted.fingerprint)
    assert r.lines() == []
    assert contact_names(alice) == ["mallory"]
    # bob hears nothing back (no acceptance), and alice was told exactly why.
    assert bob.ok("receive").lines() == []

    carol = make_agent(tmp_path, relay, "carol", None)
    befriend(carol, bob)
    before = (carol.home / "carol" / "contacts.json").read_bytes()
    r = carol.run("add", crafted.fingerprint, "--name", "mallory")
    assert r.code == 2 and "Traceback" not in r.err
    assert "box key is already pinned to your contact 'bob'" in r.err and fingerprint(bob) in r.err
    assert (carol.home / "carol" / "contacts.json").read_bytes() == before


def test_mail_goes_to_its_sealed_sender_in_a_book_that_already_shares_a_box_key(
    tmp_path: Path, pair: tuple[Agent, Agent], relay: RelayProcess
) -> None:
    """A contacts file written before pins refused shared keys: mallory's pin, named to sort
    first, holds bob's box key. bob's mail is still bob's, not 'tampered' under her name."""
    alice, bob = pair
    mallory = identity_of(make_agent(tmp_path, relay, "mallory", None), "mallory")
    crafted = borrowed_box_bundle(mallory, box_key(bob))
    book = alice.home / "alice" / "contacts.json"
    raw = read_json(book, {})
    old: Contact = pinned_contact("aaron", crafted, Source.INVITED)
    write_json(book, {**raw, "aaron": old.to_json()})
    assert contact_names(alice) == ["aaron", "bob"]

    bob.ok("send", "alice", "one")
    bob.ok("send", "alice", "two")
    got = alice.ok("receive").lines()
    assert [(m["name"], m["text"]) for m in got] == [("bob", "one"), ("bob", "two")]


def test_joining_an_inviter_whose_keys_clash_with_a_contact_spends_nothing(
    tmp_path: Path, pair: tuple[Agent, Agent], relay: RelayProcess
) -> None:
    """mallory publishes her sign key beside alice's box key and opens a real invite slot for
    it (she owns that mailbox's sign key); bob, who has alice, refuses to join it."""
    alice, bob = pair
    mallory = identity_of(make_agent(tmp_path, relay, "mallory", None), "mallory")
    crafted = borrowed_box_bundle(mallory, box_key(alice))
    owner = CraftedOwner(crafted.fingerprint, mallory.signing_key)
    code = new_code(crafted.fingerprint, 1, time.time())
    with RelayClient(relay.url) as client:
        client.publish(crafted)
        client.open_invite(owner, code.tag, code.expires)
    before = (bob.home / "bob" / "contacts.json").read_bytes()
    r = bob.run("join", code.encode())
    assert r.code == 2 and "Traceback" not in r.err
    assert f"refused to join {crafted.fingerprint}" in r.err
    assert "box key is already pinned to your contact 'alice'" in r.err
    assert (bob.home / "bob" / "contacts.json").read_bytes() == before
    # Nothing was redeemed: the slot is still open on the relay.
    body = seal_request(code, mallory.bundle(), bytes(32), secrets.token_hex(16))
    redeem(relay, code.encode(), body)


# ---------------------------------------------------------------- (c) missing or wrong proof


def test_requests_without_or_with_a_wrong_box_proof_are_refused_and_the_rest_flows(
    tmp_path: Path, pair: tuple[Agent, Agent], relay: RelayProcess
) -> None:
    alice, bob = pair
    carol_agent = make_agent(tmp_path, relay, "carol", None)
    carol = identity_of(carol_agent, "carol")
    alice_box = PublicKey(box_key(alice))

    # No proof at all: what a talk from before proofs would send.
    code_text = invite(alice)
    code = parse_code(code_text)
    body = {"v": 1, "kind": "contact_request", "id": secrets.token_hex(16),
            "bundle": carol.bundle().to_json()}
    redeem(relay, code_text, bytes(SecretBox(code.key).encrypt(pad(json.dumps(body).encode()))))
    refused_receive(alice, "no proof", carol.fingerprint)

    # carol's own keys, but a proof made for another invite (a replayed request body).
    code_text = invite(alice)
    code = parse_code(code_text)
    other = parse_code(invite(alice))
    replayed = box_proof(other, carol.bundle(), carol.box_secret, alice_box)
    redeem(relay, code_text, seal_request(code, carol.bundle(), replayed, secrets.token_hex(16)))
    refused_receive(alice, "does not hold", carol.fingerprint)

    # Random bytes for a proof.
    code_text = invite(alice)
    code = parse_code(code_text)
    forged = seal_request(code, carol.bundle(), secrets.token_bytes(32), secrets.token_hex(16))
    redeem(relay, code_text, forged)
    refused_receive(alice, "does not hold")
    assert contact_names(alice) == ["bob"]

    # What came after still flows: bob's mail, and carol's real join with a fresh code.
    bob.ok("send", "alice", "after the noise")
    assert [m["text"] for m in alice.ok("receive").lines()] == ["after the noise"]
    befriend(alice, carol_agent)
    assert contact_names(alice) == ["bob", "carol"]
    carol_agent.ok("send", "alice", "hello from carol")
    got = alice.ok("receive").lines()
    assert [(m["name"], m["text"]) for m in got] == [("carol", "hello from carol")]


def test_joining_an_inviter_whose_box_key_is_degenerate_fails_in_one_line(
    tmp_path: Path, bob: Agent, relay: RelayProcess
) -> None:
    """An all-zero X25519 key agrees on nothing; the join says so and spends nothing."""
    mallory = identity_of(make_agent(tmp_path, relay, "mallory", None), "mallory")
    crafted = borrowed_box_bundle(mallory, bytes(32))
    code = new_code(crafted.fingerprint, 1, time.time())
    with RelayClient(relay.url) as client:
        client.publish(crafted)
        client.open_invite(CraftedOwner(crafted.fingerprint, mallory.signing_key), code.tag, code.expires)
    r = bob.run("join", code.encode())
    assert r.code == 1 and "Traceback" not in r.err and len(r.err.strip().splitlines()) == 1
    assert "unusable box key" in r.err
    assert contact_names(bob) == []
