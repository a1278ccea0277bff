"""Our ratchet keys on a real relay: `talk init` and the follower publish and top them up, and
a peer's claim is checked against the fingerprint it pinned."""

from __future__ import annotations

from pathlib import Path

import pytest

from durable.errors import PinMismatch
from follower.relay.client import RelayClient
from follower.send.ratchet_keys import LOW, TARGET, claim_ratchet_key, publish_ratchet_keys
from keys import keystore
from keys.contacts import ContactBook
from keys.identity import Identity
from keys.ratchet.account import RatchetAccount, card_for
from keys.ratchet.card import Publication
from tests.conftest import Agent, wait_for

ALICE_PASS = b"correct horse battery staple"  # the `alice` fixture's


def unlocked(agent: Agent, name: str, passphrase: bytes | None) -> tuple[Path, Identity]:
    folder = agent.home / name
    return folder, keystore.unlock(keystore.load(folder), passphrase)


def waiting_keys(agent: Agent, name: str, passphrase: bytes | None) -> int:
    """How many one-time keys the relay holds for the identity: a publication of the card alone."""
    folder, identity = unlocked(agent, name, passphrase)
    card = card_for(RatchetAccount(folder, identity).read(), identity)
    with RelayClient(agent.relay_url) as client:
        return client.publish_ratchet(identity, Publication(card, None, []).to_json())


def test_init_publishes_a_card_and_keys_a_pinned_peer_can_claim(pair: tuple[Agent, Agent]) -> None:
    alice, bob = pair
    assert waiting_keys(alice, "alice", ALICE_PASS) == TARGET
    pinned = ContactBook(bob.home / "bob").get("alice")
    folder, identity = unlocked(alice, "alice", ALICE_PASS)
    with RelayClient(bob.relay_url) as client:
        first, second = claim_ratchet_key(client, pinned), claim_ratchet_key(client, pinned)
    assert first.key.key_id != second.key.key_id
    assert first.card.curve25519 == RatchetAccount(folder, identity).read().curve25519_key.to_bytes()
    assert waiting_keys(alice, "alice", ALICE_PASS) == TARGET - 2


def test_keys_not_signed_by_the_pinned_key_are_a_pin_mismatch(pair: tuple[Agent, Agent]) -> None:
    """What a peer sees when the relay serves someone else's keys under alice's fingerprint:
    here the peer pinned another signing key for that fingerprint, which the check cannot tell
    apart from a relay that swapped the card."""
    _, bob = pair
    pinned = ContactBook(bob.home / "bob").get("alice")
    forged_pin = pinned._replace(sign_key=Identity.generate("mallory").sign_public)
    with RelayClient(bob.relay_url) as client, pytest.raises(PinMismatch, match="PIN MISMATCH"):
        claim_ratchet_key(client, forged_pin)


def test_the_follower_tops_up_what_peers_claimed(pair: tuple[Agent, Agent]) -> None:
    alice, bob = pair
    alice.extra_env["TALK_RATCHET_EVERY"] = "0.2"
    pinned = ContactBook(bob.home / "bob").get("alice")
    with RelayClient(bob.relay_url) as client:
        for _ in range(TARGET - LOW + 5):
            claim_ratchet_key(client, pinned)
    assert waiting_keys(alice, "alice", ALICE_PASS) == LOW - 5
    alice.ok("follow", "--peer", "bob")
    try:
        wait_for(lambda: waiting_keys(alice, "alice", ALICE_PASS) == TARGET, 60, "the follower's top-up")
        with RelayClient(bob.relay_url) as client:  # claimed again while it runs: topped up again
            for _ in range(TARGET - LOW + 1):
                claim_ratchet_key(client, pinned)
        wait_for(lambda: waiting_keys(alice, "alice", ALICE_PASS) == TARGET, 60, "the periodic top-up")
    finally:
        alice.run("stop")


def test_publishing_again_resends_only_what_the_relay_lacks(bob: Agent) -> None:
    folder, identity = unlocked(bob, "bob", None)
    store = RatchetAccount(folder, identity)
    with RelayClient(bob.relay_url) as client:
        assert publish_ratchet_keys(client, store, identity) == TARGET
        assert store.read().one_time_keys == {}  # all marked published
        assert publish_ratchet_keys(client, store, identity) == TARGET  # nothing new to send
        kinds = [client.claim_ratchet(identity.fingerprint)["kind"] for _ in range(TARGET + 1)]
    assert kinds == ["one_time"] * TARGET + ["fallback"]  # init's fallback key, never dropped
