"""A relay on Redis while Redis goes away: every route answers 503 store_unavailable with
Retry-After, nothing is lost, and when Redis is back the very next request is served.

Each test runs a redis-server of its own (tests.redis_support.RedisServer) and kills it with
SIGKILL; the relay is a real `talk relay --store redis://...` process.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from websockets.exceptions import InvalidStatus

from keys.identity import Identity
from tests.conftest import Agent, befriend, free_port, make_agent, wait_for
from tests.e2e.relay_calls import (
    Reply,
    call,
    deposit,
    fetch,
    jbody,
    new_tag,
    open_stream,
    publish,
    signed,
)
from tests.redis_support import RedisServer, StoreRelay


@pytest.fixture
def own_redis(tmp_path: Path) -> Iterator[RedisServer]:
    server = RedisServer(tmp_path / "redis", free_port()).start()
    yield server
    server.kill()


@pytest.fixture
def volatile_redis(tmp_path: Path) -> Iterator[RedisServer]:
    server = RedisServer(tmp_path / "redis", free_port(), persist=False).start()
    yield server
    server.kill()


def relay_on(tmp_path: Path, server: RedisServer) -> StoreRelay:
    return StoreRelay(tmp_path / "unused.db", free_port(), store=server.url).start()


def relay_log(relay: StoreRelay) -> str:
    assert relay.proc is not None and relay.proc.stderr is not None
    relay.proc.terminate()
    log = relay.proc.stderr.read().decode(errors="replace")
    relay.stop()
    return log


def assert_unavailable(reply: Reply, what: str) -> None:
    assert reply.status == 503, f"{what}: {reply.status} {reply.body[:200]!r}"
    assert json.loads(reply.body)["error"] == "store_unavailable", what
    after = reply.headers.get("retry-after", "")
    assert after.isdigit() and int(after) >= 1, (what, reply.headers)


def every_route(relay: StoreRelay, alice: Identity, bob: Identity) -> dict[str, Reply]:
    """One request per route; alice's key is cached by the relay (she fetched before), bob's
    is not (he never made a request), so both paths to the store are taken."""
    fp, tag = alice.fingerprint, new_tag()
    carol = Identity.generate("carol")
    owner = {f"{route} (signed)": signed(relay, alice, "POST", f"/v1/mail/{fp}/{route}", body)
             for route, body in [("fetch", jbody({"tags": [tag]})), ("ack", jbody({"ids": ["1"]})),
                                 ("purge", jbody({"tags": [tag]})), ("session", b"")]}
    return {
        "healthz": call(relay, "GET", "/healthz"),
        "publish keys": call(relay, "PUT", f"/v1/keys/{carol.fingerprint}",
                             jbody(carol.bundle().to_json())),
        "look up keys": call(relay, "GET", f"/v1/keys/{fp}"),
        "deposit (key cached)": call(relay, "POST", f"/v1/mail/{fp}/{tag}", b"sealed"),
        "deposit (key not cached)": call(relay, "POST", f"/v1/mail/{bob.fingerprint}/{tag}", b"sealed"),
        "session (key not cached)": signed(relay, bob, "POST", f"/v1/mail/{bob.fingerprint}/session", b""),
        "open invite": signed(relay, alice, "POST", f"/v1/invites/{fp}",
                              jbody({"tag": new_tag(), "expires": 2_000_000_000})),
        "revoke invite": signed(relay, alice, "POST", f"/v1/invites/{fp}/revoke", jbody({"tag": tag})),
        "redeem": call(relay, "POST", f"/v1/redeem/{tag}", b"sealed request"),
        **owner,
    }


def test_while_redis_is_down_every_route_answers_503_and_the_next_request_after_is_served(
        tmp_path: Path, own_redis: RedisServer) -> None:
    relay = relay_on(tmp_path, own_redis)
    try:
        alice, bob = publish(relay, "alice"), publish(relay, "bob")
        tag = new_tag()
        kept = deposit(relay, alice.fingerprint, tag, b"deposited before the outage")
        assert [m["id"] for m in fetch(relay, alice, [tag])["messages"]] == [kept]

        own_redis.kill()
        for what, reply in every_route(relay, alice, bob).items():
            assert_unavailable(reply, what)
        with pytest.raises(InvalidStatus) as refused, open_stream(relay, alice):
            pass
        response = refused.value.response
        assert response.status_code == 503 and int(response.headers["Retry-After"]) >= 1
        assert json.loads(bytes(response.body or b""))["error"] == "store_unavailable"

        own_redis.start()
        # Every pooled connection to the old server is dead: the first request on each is retried
        # on a fresh one, so none of these fails.
        assert [m["id"] for m in fetch(relay, alice, [tag])["messages"]] == [kept]
        later = deposit(relay, alice.fingerprint, tag, b"after")
        assert [m["id"] for m in fetch(relay, alice, [tag])["messages"]] == [kept, later]
        assert call(relay, "GET", "/healthz").status == 200
        with open_stream(relay, alice):
            pass
    finally:
        log = relay_log(relay)
    assert "Traceback" not in log, log
    assert "store does not answer" in log  # said once, not once per request
    assert log.count("store does not answer") <= 2, log


def test_a_frozen_redis_is_an_outage_too(tmp_path: Path, own_redis: RedisServer) -> None:
    """A server that accepts and then says nothing (SIGSTOP) must not hold requests forever."""
    relay = relay_on(tmp_path, own_redis)
    try:
        alice = publish(relay, "alice")
        tag = new_tag()
        kept = deposit(relay, alice.fingerprint, tag, b"before")
        own_redis.pause()
        try:
            assert_unavailable(call(relay, "POST", f"/v1/mail/{alice.fingerprint}/{tag}", b"x"),
                               "deposit")
            assert_unavailable(call(relay, "GET", "/healthz"), "healthz")
        finally:
            own_redis.pause(False)
        # The deposit that met the frozen server may still land once it runs again (the client
        # repeats it under the same message id, which the receiver shows once); the mail is kept.
        ids = [m["id"] for m in fetch(relay, alice, [tag])["messages"]]
        assert ids[:1] == [kept]
    finally:
        log = relay_log(relay)
    assert "Traceback" not in log, log


def status(agent: Agent) -> dict[str, Any]:
    return dict(agent.ok("status", "--json").json()["follower"])


def spooled_texts(agent: Agent, name: str) -> list[str]:
    inbox = agent.home / name / "spool" / "inbox.ndjson"
    if not inbox.exists():
        return []
    return [json.loads(line)["text"] for line in inbox.read_text().splitlines() if line.strip()]


def test_a_mailbox_the_store_forgot_is_published_again_by_its_owner(
        tmp_path: Path, volatile_redis: RedisServer) -> None:
    """Redis restarted without persistence loses every published key. Nobody could write to
    bob; bob's follower notices on its next request, publishes his keys again, says so in
    `talk status`, and mail flows again without anyone running `talk publish`."""
    relay = relay_on(tmp_path, volatile_redis)
    try:
        alice = make_agent(tmp_path, relay, "alice", None)
        bob = make_agent(tmp_path, relay, "bob", None)
        befriend(alice, bob)
        bob.ok("follow", "--peer", "alice")
        alice.ok("send", "bob", "before")
        wait_for(lambda: spooled_texts(bob, "bob") == ["before"], 30, "the first message")

        volatile_redis.kill()
        volatile_redis.start()  # empty
        relay.restart()  # a fresh process (or another replica): nothing cached either
        wait_for(lambda: status(bob).get("republished_at") is not None, 60,
                 "bob's follower to publish his keys again")
        assert "keys published again" in bob.ok("status").out

        alice.ok("send", "bob", "after")
        wait_for(lambda: spooled_texts(bob, "bob") == ["before", "after"], 30, "the second message")
        bob.ok("stop")
    finally:
        log = relay_log(relay)
    assert "Traceback" not in log, log


def test_talk_receive_publishes_lost_keys_and_says_so(tmp_path: Path, volatile_redis: RedisServer) -> None:
    relay = relay_on(tmp_path, volatile_redis)
    try:
        alice = make_agent(tmp_path, relay, "alice", None)
        bob = make_agent(tmp_path, relay, "bob", None)
        befriend(alice, bob)
        volatile_redis.kill()
        volatile_redis.start()
        relay.restart()
        r = bob.ok("receive")
        assert r.out == "" and "published again" in r.err
        alice.ok("send", "bob", "after")
        again = bob.ok("receive")
        assert [json.loads(line)["text"] for line in again.out.splitlines()] == ["after"]
        assert again.err == ""  # said once: the relay has the keys now
    finally:
        relay_log(relay)
