"""How the relay talks to Redis: bounded waits, one retry on a fresh connection, and every
outage turned into `relay.store.StoreUnavailable`.

After Redis restarts, each pooled connection is a dead socket that fails on its first use:
one immediate retry on a new connection makes that invisible to the request that met it.
While Redis is down or frozen, a command fails within CONNECT_TIMEOUT_S (refused or silent)
or a store call within COMMAND_TIMEOUT_S (a server that accepted and then froze), rather than
holding the request for redis-py's default backoff of several seconds, or forever.

The command limit is one `asyncio.timeout` around each store call (`guarded`), not redis-py's
socket timeout: on Python 3.11 that costs a task and two timers per command, a fifth of the
relay's own CPU per deposit. A call cut short leaves its connection closed by redis-py, never
half read.

The scripts on every request's path go through `relay.redis_pipeline` instead, bounded there
(`pipelined`).
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, ParamSpec, TypeVar

from redis.asyncio import Redis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from relay.store import StoreUnavailable

CONNECT_TIMEOUT_S = 1.0
COMMAND_TIMEOUT_S = 5.0  # far above any one store call: purge batches and fetches are bounded in size
# BusyLoadingError (a Redis still reading its data back) is a ConnectionError.
OUTAGE = (RedisConnectionError, RedisTimeoutError, OSError)

P = ParamSpec("P")
T = TypeVar("T")


def connect(url: str) -> Redis:
    """A client for `url`: its commands wait as long as the `guarded` call around them allows
    (a pub/sub listener, for messages, without a limit)."""
    # Not on a timeout: a frozen server would make every request wait twice as long for nothing.
    retry = Retry(NoBackoff(), retries=1, supported_errors=(RedisConnectionError,))
    return Redis.from_url(url, decode_responses=False, socket_connect_timeout=CONNECT_TIMEOUT_S,
                          socket_timeout=None, retry=retry)


def guarded(method: Callable[P, Coroutine[Any, Any, T]]) -> Callable[P, Coroutine[Any, Any, T]]:
    """`method` within COMMAND_TIMEOUT_S, with a Redis outage (or that time running out) raised as
    StoreUnavailable (a script's own error stays a bug)."""
    @functools.wraps(method)
    async def call(*args: P.args, **kwargs: P.kwargs) -> T:
        try:
            async with asyncio.timeout(COMMAND_TIMEOUT_S):
                return await method(*args, **kwargs)
        except OUTAGE as exc:  # TimeoutError, the time running out, is an OSError
            raise _unavailable(exc) from exc
    return call


def pipelined(method: Callable[P, Coroutine[Any, Any, T]]) -> Callable[P, Coroutine[Any, Any, T]]:
    """`guarded` for a method whose Redis calls all go through `relay.redis_pipeline`, which
    already bounds each batch by COMMAND_TIMEOUT_S and answers every caller in it: a second
    limit per call would only add its timer, about a tenth of the relay's Redis work per message."""
    @functools.wraps(method)
    async def call(*args: P.args, **kwargs: P.kwargs) -> T:
        try:
            return await method(*args, **kwargs)
        except OUTAGE as exc:
            raise _unavailable(exc) from exc
    return call


def _unavailable(exc: BaseException) -> StoreUnavailable:
    return StoreUnavailable(f"Redis does not answer: {str(exc) or 'timed out'}")


async def in_batches(batch: int, sweep: Callable[[int], Awaitable[tuple[int, int]]]) -> int:
    """Call `sweep(batch)` (one script call that looks at up to `batch` entries and returns how
    many it looked at and how many it removed) until one comes back short: each call stays within
    the command limit however many there are. Returns how many were removed in all."""
    gone = 0
    while True:
        swept, removed = await sweep(batch)
        gone += removed
        if swept < batch:
            return gone
