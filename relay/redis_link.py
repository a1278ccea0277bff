"""How the relay talks to Redis: bounded waits, one retry on a fresh connection, and every
outage turned into `relay.store.StoreUnavailable`.

After Redis restarts, each pooled connection is a dead socket that fails on its first use:
one immediate retry on a new connection makes that invisible to the request that met it.
While Redis is down or frozen, a command fails within CONNECT_TIMEOUT_S (refused or silent)
or COMMAND_TIMEOUT_S (a server that accepted and then froze), rather than holding the request
for redis-py's default backoff of several seconds, or forever.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Coroutine
from typing import Any, ParamSpec, TypeVar

from redis.asyncio import Redis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from relay.store import StoreUnavailable

CONNECT_TIMEOUT_S = 1.0
COMMAND_TIMEOUT_S = 5.0  # far above any one script: purges and fetches are bounded in size
# BusyLoadingError (a Redis still reading its data back) is a ConnectionError.
OUTAGE = (RedisConnectionError, RedisTimeoutError, OSError)

P = ParamSpec("P")
T = TypeVar("T")


def connect(url: str, *, listener: bool = False) -> Redis:
    """A client for `url`. A `listener` (pub/sub) waits for messages without a time limit."""
    # Not on a timeout: a frozen server would make every request wait twice as long for nothing.
    retry = Retry(NoBackoff(), retries=1, supported_errors=(RedisConnectionError,))
    return Redis.from_url(url, decode_responses=False, socket_connect_timeout=CONNECT_TIMEOUT_S,
                          socket_timeout=None if listener else COMMAND_TIMEOUT_S, retry=retry)


def guarded(method: Callable[P, Coroutine[Any, Any, T]]) -> Callable[P, Coroutine[Any, Any, T]]:
    """`method` with a Redis outage raised as StoreUnavailable (a script's own error stays a bug)."""
    @functools.wraps(method)
    async def call(*args: P.args, **kwargs: P.kwargs) -> T:
        try:
            return await method(*args, **kwargs)
        except OUTAGE as exc:
            raise StoreUnavailable(f"Redis does not answer: {exc}") from exc
    return call
