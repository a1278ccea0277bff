"""The store fixtures the relay's store tests share: every backend, on a fresh event loop."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest

from relay.redis_store import RedisStore
from relay.sqlite_store import SqliteStore
from relay.store import Store
from tests.redis_support import redis_prefix

T = TypeVar("T")
Run = Callable[[Awaitable[T]], T]


@pytest.fixture
def loop() -> Iterator[asyncio.AbstractEventLoop]:
    """One event loop per test: a Redis connection belongs to the loop that opened it."""
    loop = asyncio.new_event_loop()
    yield loop
    loop.close()


@pytest.fixture
def run(loop: asyncio.AbstractEventLoop) -> Run[Any]:
    return loop.run_until_complete


@pytest.fixture(params=["sqlite", "redis"])
def store(request: pytest.FixtureRequest, tmp_path: Path, loop: asyncio.AbstractEventLoop) -> Iterator[Store]:
    if request.param == "sqlite":
        sqlite = SqliteStore(tmp_path / "relay.db")
        yield sqlite
        loop.run_until_complete(sqlite.close())
        return
    with redis_prefix() as prefix:
        shared = RedisStore(request.getfixturevalue("redis_url"), prefix)
        yield shared
        loop.run_until_complete(shared.close())


@pytest.fixture
def redis_url() -> str:
    from tests.redis_support import require_redis

    return require_redis()
