"""relay.redis_link against a real Redis server: a script call past redis-py's command layers
still loads a script Redis does not know, survives a pooled connection Redis closed, and
raises a script's own error; a store call is bounded in time."""

from __future__ import annotations

import asyncio
import secrets

import pytest
from redis.asyncio import Redis
from redis.exceptions import ResponseError

from relay import redis_link
from relay.store import StoreUnavailable
from tests.redis_support import require_redis


def _script(client: Redis, body: str) -> object:
    # A comment no other script has: Redis cannot know this one yet.
    return client.register_script(f"-- {secrets.token_hex(8)}\n{body}")


async def _echo_twice(url: str) -> list[object]:
    client = redis_link.connect(url)
    try:
        script = _script(client, "return ARGV[1]")
        first = await redis_link.run_script(client, script, ["one"])  # type: ignore[arg-type]
        second = await redis_link.run_script(client, script, ["two"])  # type: ignore[arg-type]
        return [first, second]
    finally:
        await client.aclose()


def test_an_unknown_script_is_loaded_and_run() -> None:
    assert asyncio.run(_echo_twice(require_redis())) == [b"one", b"two"]


async def _after_the_connection_is_killed(url: str) -> object:
    client = redis_link.connect(url)
    killer = Redis.from_url(url)
    try:
        script = _script(client, "return ARGV[1]")
        await redis_link.run_script(client, script, ["warm"])  # type: ignore[arg-type]
        ours = await client.client_id()  # the pool's one connection, idle again
        await killer.client_kill_filter(_id=str(ours))
        return await redis_link.run_script(client, script, ["again"])  # type: ignore[arg-type]
    finally:
        await client.aclose()
        await killer.aclose()


def test_a_connection_redis_closed_is_replaced_once() -> None:
    assert asyncio.run(_after_the_connection_is_killed(require_redis())) == b"again"


async def _failing(url: str) -> None:
    client = redis_link.connect(url)
    try:
        await redis_link.run_script(client, _script(client, "return redis.error_reply('no')"), [])  # type: ignore[arg-type]
    finally:
        await client.aclose()


def test_a_scripts_own_error_is_raised_as_it_comes() -> None:
    with pytest.raises(ResponseError, match="no"):
        asyncio.run(_failing(require_redis()))


def test_a_store_call_that_outlasts_the_limit_is_unavailable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(redis_link, "COMMAND_TIMEOUT_S", 0.01)

    @redis_link.guarded
    async def stuck() -> None:
        await asyncio.sleep(10)

    with pytest.raises(StoreUnavailable, match="timed out"):
        asyncio.run(stuck())
