"""relay.redis_pipeline against a real Redis server: the script calls of one turn of the event
loop go in one write, each gets its own reply or error, a script Redis does not know is loaded,
and a pooled connection Redis closed is replaced once."""

from __future__ import annotations

import asyncio
import secrets
from typing import Any

import pytest
from redis.asyncio import Redis
from redis.commands.core import AsyncScript
from redis.exceptions import ResponseError

from relay import redis_link
from relay.redis_pipeline import ScriptPipeline
from tests.redis_support import require_redis


def _script(client: Redis, body: str) -> AsyncScript:
    # A comment no other script has: Redis cannot know this one yet.
    script: AsyncScript = client.register_script(f"-- {secrets.token_hex(8)}\n{body}")
    return script


async def _with_pipeline(test: Any) -> Any:
    client = redis_link.connect(require_redis())
    try:
        return await test(client, ScriptPipeline(client))
    finally:
        await client.aclose()


async def _one_turn(client: Redis, pipeline: ScriptPipeline) -> tuple[list[Any], int]:
    echo = _script(client, "return ARGV[1]")
    fail = _script(client, "return redis.error_reply('no ' .. ARGV[1])")
    writes = 0
    pool = client.connection_pool
    taken: Any = pool.get_connection

    async def counted(*args: Any, **kwargs: Any) -> Any:
        nonlocal writes
        writes += 1
        return await taken(*args, **kwargs)

    await pipeline.run(echo, ["warm"])  # both scripts loaded by their first calls
    with pytest.raises(ResponseError):
        await pipeline.run(fail, ["warm"])
    pool.get_connection = counted  # type: ignore[method-assign]
    calls = [pipeline.run(fail if k == 3 else echo, [str(k)]) for k in range(8)]
    replies = await asyncio.gather(*calls, return_exceptions=True)
    return [str(r) if isinstance(r, ResponseError) else r for r in replies], writes


def test_one_turns_calls_go_in_one_write_each_with_its_own_reply() -> None:
    replies, writes = asyncio.run(_with_pipeline(_one_turn))
    assert replies == [b"0", b"1", b"2", "no 3", b"4", b"5", b"6", b"7"]
    assert writes == 1


async def _unknown(client: Redis, pipeline: ScriptPipeline) -> list[Any]:
    script = _script(client, "return ARGV[1]")
    return list(await asyncio.gather(pipeline.run(script, ["one"]), pipeline.run(script, ["two"])))


def test_an_unknown_script_is_loaded_and_its_calls_run() -> None:
    assert asyncio.run(_with_pipeline(_unknown)) == [b"one", b"two"]


async def _on_a_connection_that_dies(client: Redis, pipeline: ScriptPipeline) -> Any:
    script = _script(client, "return ARGV[1]")
    await pipeline.run(script, ["warm"])
    pool = client.connection_pool
    taken: Any = pool.get_connection
    handed: list[Any] = []

    async def dead_first(*args: Any, **kwargs: Any) -> Any:
        conn = await taken(*args, **kwargs)
        if not handed:  # as after a Redis restart: the socket is gone under the pooled connection
            conn._writer.transport.abort()
        handed.append(conn)
        return conn

    pool.get_connection = dead_first  # type: ignore[method-assign]
    replies = await asyncio.gather(pipeline.run(script, ["again"]), pipeline.run(script, ["and"]))
    return replies, len(handed)


def test_calls_on_a_connection_that_died_go_once_more_on_a_fresh_one() -> None:
    assert asyncio.run(_with_pipeline(_on_a_connection_that_dies)) == ([b"again", b"and"], 2)
