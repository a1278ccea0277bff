"""relay.redis_link: a store call is bounded in time, and running out of it is an outage."""

from __future__ import annotations

import asyncio

import pytest

from relay import redis_link
from relay.store import StoreUnavailable


def test_a_store_call_that_outlasts_the_limit_is_unavailable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(redis_link, "COMMAND_TIMEOUT_S", 0.01)

    @redis_link.guarded
    async def stuck() -> None:
        await asyncio.sleep(10)

    with pytest.raises(StoreUnavailable, match="timed out"):
        asyncio.run(stuck())


def test_a_pipelined_call_turns_an_outage_into_unavailable_and_sets_no_limit_of_its_own(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The pipeline bounds its batches; the method itself runs past COMMAND_TIMEOUT_S unhurried."""
    monkeypatch.setattr(redis_link, "COMMAND_TIMEOUT_S", 0.01)

    @redis_link.pipelined
    async def slow() -> str:
        await asyncio.sleep(0.05)
        return "answered"

    @redis_link.pipelined
    async def refused() -> None:
        raise ConnectionRefusedError("connection refused")

    assert asyncio.run(slow()) == "answered"
    with pytest.raises(StoreUnavailable, match="connection refused"):
        asyncio.run(refused())
