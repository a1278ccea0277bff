"""The relay's ratchet key directory on the wire: publish, claim once each, fall back, refuse forgeries.

Each test runs on SQLite and on a real Redis server behind two relay replicas, so that claims
racing through different processes are tested on the store that several replicas share.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from keys.identity import Identity
from keys.ratchet.account import RatchetAccount, card_for, new_fallback_key, unpublished_keys
from keys.ratchet.card import KeyKind, Publication, sign_key, verify_card, verify_claim
from relay.config import RelayConfig
from tests.conftest import RelayProcess, free_port
from tests.e2e.relay_calls import Reply, assert_error, call, publish, signed
from tests.redis_support import StoreRelay, redis_prefix, require_redis

MOST = RelayConfig().max_ratchet_keys


@pytest.fixture(params=["sqlite", "redis"])
def relays(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[list[RelayProcess]]:
    """One relay on SQLite, or two replicas sharing one Redis."""
    if request.param == "sqlite":
        relay = RelayProcess(tmp_path / "relay.db", free_port()).start()
        yield [relay]
        relay.stop()
        return
    with redis_prefix() as prefix:
        store = f"{require_redis()}?prefix={prefix}"
        pair: list[RelayProcess] = [
            StoreRelay(tmp_path / f"{n}.db", free_port(), store=store).start() for n in "ab"
        ]
        yield pair
        for each in pair:
            each.stop()


class Owner:
    """An identity with a published bundle and an Olm account of its own."""

    def __init__(self, relay: RelayProcess, folder: Path, name: str = "alice") -> None:
        self.identity = publish(relay, name)
        self.fp = self.identity.fingerprint
        folder.mkdir(mode=0o700)
        self.account = RatchetAccount(folder, self.identity)

    def publication(self, one_time: int, fallback: bool = False) -> Publication:
        with self.account.changing() as account:
            account.generate_one_time_keys(one_time)
            if fallback:
                new_fallback_key(account)
            new_fallback, keys = unpublished_keys(account, self.identity)
            account.mark_keys_as_published()
        return Publication(card_for(account, self.identity), new_fallback, keys)

    def put(self, relay: RelayProcess, body: Any, signer: Identity | None = None) -> Reply:
        path = f"/v1/ratchet/{self.fp}"
        return signed(relay, signer or self.identity, "PUT", path, json.dumps(body).encode())

    def published(self, relay: RelayProcess, publication: Publication) -> int:
        reply = self.put(relay, publication.to_json())
        assert reply.status == 200, reply.body
        left = reply.json()["one_time_left"]
        assert isinstance(left, int)
        return left


def claim(relay: RelayProcess, owner: Owner) -> tuple[str, int]:
    """(kind, key id) of one claim, checked as a peer checks it."""
    reply = call(relay, "POST", f"/v1/ratchet/{owner.fp}/claim")
    assert reply.status == 200, reply.body
    got = verify_claim(reply.json(), owner.fp, owner.identity.sign_public)
    return reply.json()["kind"], got.key.key_id


def test_publish_then_each_claim_gets_another_key(relays: list[RelayProcess], tmp_path: Path) -> None:
    relay = relays[0]
    owner = Owner(relay, tmp_path / "alice")
    assert owner.published(relay, owner.publication(3, fallback=True)) == 3
    first, second = claim(relay, owner), claim(relay, owner)
    assert first[0] == second[0] == "one_time" and first[1] != second[1]
    reply = call(relays[-1], "POST", f"/v1/ratchet/{owner.fp}/claim")  # the other replica
    card = verify_claim(reply.json(), owner.fp, owner.identity.sign_public).card
    assert card.curve25519 == owner.account.read().curve25519_key.to_bytes()


def test_exhausted_one_time_keys_fall_back_and_the_owner_tops_up(
    relays: list[RelayProcess], tmp_path: Path
) -> None:
    relay = relays[0]
    owner = Owner(relay, tmp_path / "alice")
    owner.published(relay, owner.publication(2, fallback=True))
    claims = [claim(relays[i % len(relays)], owner) for i in range(4)]
    assert [kind for kind, _ in claims] == ["one_time", "one_time", "fallback", "fallback"]
    assert claims[2] == claims[3]  # the fallback key stays until the owner replaces it
    assert owner.published(relay, owner.publication(0)) == 0  # an empty publication: the count
    assert owner.published(relay, owner.publication(5)) == 5  # the top-up
    assert [claim(relay, owner)[0] for _ in range(5)] == ["one_time"] * 5
    assert claim(relay, owner)[0] == "fallback"


def test_concurrent_claims_never_get_the_same_key(relays: list[RelayProcess], tmp_path: Path) -> None:
    relay = relays[0]
    owner = Owner(relay, tmp_path / "alice")
    owner.published(relay, owner.publication(50, fallback=True))
    with ThreadPoolExecutor(max_workers=12) as pool:
        claims = list(pool.map(lambda i: claim(relays[i % len(relays)], owner), range(60)))
    one_time = [key_id for kind, key_id in claims if kind == "one_time"]
    assert len(one_time) == 50 and len(set(one_time)) == 50
    assert len([kind for kind, _ in claims if kind == "fallback"]) == 10


def test_nobody_can_publish_keys_for_someone_else(relays: list[RelayProcess], tmp_path: Path) -> None:
    relay = relays[0]
    alice = Owner(relay, tmp_path / "alice", "alice")
    mallory = Owner(relay, tmp_path / "mallory", "mallory")
    # Mallory's own keys, under alice's path, in a request signed by mallory: not the owner.
    assert_error(alice.put(relay, mallory.publication(2).to_json(), mallory.identity), 403, "forbidden")
    # Alice's own request, carrying keys alice did not sign (a relay-side swap, say).
    genuine = alice.publication(2, fallback=True)
    swapped = sign_key(KeyKind.ONE_TIME, alice.fp, 99, b"\x05" * 32, mallory.identity.sign)
    for body in (
        {**genuine.to_json(), "one_time": [swapped.to_json()]},
        {**genuine.to_json(), "card": mallory.publication(0).card.to_json()},
        {**genuine.to_json(), "fallback": genuine.one_time[0].to_json()},  # a one-time key as fallback
    ):
        assert_error(alice.put(relay, body), 400, "bad_request", "invalid ratchet keys")
    assert_error(call(relay, "POST", f"/v1/ratchet/{alice.fp}/claim"), 404, "not_found", "no ratchet keys")


def test_the_relay_keeps_at_most_its_cap(relays: list[RelayProcess], tmp_path: Path) -> None:
    relay = relays[0]
    owner = Owner(relay, tmp_path / "alice")
    assert owner.published(relay, owner.publication(MOST - 10, fallback=True)) == MOST - 10
    assert_error(owner.put(relay, owner.publication(11).to_json()), 507, "keys_full", f"at most {MOST}")
    assert owner.published(relay, owner.publication(10)) == MOST
    one_key = owner.publication(1).one_time[0].to_json()
    too_many = owner.publication(0).to_json() | {"one_time": [one_key] * (MOST + 1)}
    assert_error(owner.put(relay, too_many), 400, "bad_request", f"at most {MOST} keys")


def test_a_replayed_publication_never_hands_a_key_out_twice(
    relays: list[RelayProcess], tmp_path: Path
) -> None:
    relay = relays[0]
    owner = Owner(relay, tmp_path / "alice")
    first = owner.publication(2, fallback=True)
    owner.published(relay, first)
    taken = claim(relay, owner)[1]
    assert owner.published(relay, first) == 1  # a client's retry: the claimed key stays gone
    kind, other = claim(relay, owner)
    assert kind == "one_time" and other != taken
    assert claim(relay, owner)[0] == "fallback"


def test_the_card_is_read_without_taking_a_key(relays: list[RelayProcess], tmp_path: Path) -> None:
    relay = relays[0]
    owner = Owner(relay, tmp_path / "alice")
    assert_error(call(relay, "GET", f"/v1/ratchet/{owner.fp}/card"), 404, "not_found", "no ratchet keys")
    owner.published(relay, owner.publication(1, fallback=True))
    for each in relays * 3:  # on every replica, as often as asked
        reply = call(each, "GET", f"/v1/ratchet/{owner.fp}/card")
        assert reply.status == 200 and set(reply.json()) == {"card"}  # the card alone, never a key
        card = verify_card(reply.json()["card"], owner.fp, owner.identity.sign_public)
        assert card.curve25519 == owner.account.read().curve25519_key.to_bytes()
    assert claim(relay, owner)[0] == "one_time"  # the one key is still there to claim
    assert claim(relay, owner)[0] == "fallback"
