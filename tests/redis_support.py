"""A real Redis server for the store suite and for relays on it; never a mock.

REDIS_URL picks the server (default redis://127.0.0.1:6379/0). Each user gets a fresh random
key prefix and deletes its own keys afterwards: the server may be shared, so no FLUSHDB.
Unreachable Redis skips the test with a message, or fails it when TALK_REQUIRE_REDIS=1 (CI).
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
import redis

from tests.conftest import RelayProcess, wait_for

REDIS_URL = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0")


def require_redis() -> str:
    """REDIS_URL if a server answers there; otherwise skip, or fail under TALK_REQUIRE_REDIS=1."""
    try:
        with redis.Redis.from_url(REDIS_URL, socket_connect_timeout=2) as client:
            client.ping()
    except (redis.RedisError, OSError) as exc:
        message = f"no Redis server at {REDIS_URL} ({exc}); set REDIS_URL or start redis-server"
        if os.environ.get("TALK_REQUIRE_REDIS") == "1":
            pytest.fail(message + " (TALK_REQUIRE_REDIS=1: Redis must be reachable here)")
        pytest.skip(message)
    return REDIS_URL


def keys_under(prefix: str) -> list[bytes]:
    with redis.Redis.from_url(REDIS_URL) as client:
        return list(client.scan_iter(match=prefix + "*", count=1000))


def drop_keys(prefix: str) -> None:
    with redis.Redis.from_url(REDIS_URL) as client:
        for key in client.scan_iter(match=prefix + "*", count=1000):
            client.delete(key)


@contextmanager
def redis_prefix() -> Iterator[str]:
    """A prefix no other test uses; its keys are gone afterwards."""
    require_redis()
    prefix = f"talk-test-{secrets.token_hex(6)}:"
    try:
        yield prefix
    finally:
        drop_keys(prefix)


@dataclass
class StoreRelay(RelayProcess):
    """`talk relay --store URL` as a real process (RelayProcess runs the --db form)."""

    store: str = ""

    def store_args(self) -> list[str]:
        return ["--store", self.store]


@dataclass
class RedisServer:
    """A redis-server of this test's own, on its own port, that the test may kill and start
    again: the shared server must never be stopped. `persist` keeps the data across a kill
    (an append-only file, fsynced on every write); without it, a restart comes back empty."""

    folder: Path
    port: int
    persist: bool = True
    proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> RedisServer:
        binary = shutil.which("redis-server")
        if binary is None:
            message = "no redis-server program here to run a Redis of the test's own"
            if os.environ.get("TALK_REQUIRE_REDIS") == "1":
                pytest.fail(message + " (TALK_REQUIRE_REDIS=1)")
            pytest.skip(message)
        self.folder.mkdir(parents=True, exist_ok=True)
        keep = ["--appendonly", "yes", "--appendfsync", "always"] if self.persist else ["--appendonly", "no"]
        self.proc = subprocess.Popen(
            [binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--dir",
             str(self.folder), *keep],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        wait_for(self.answers, 15, f"redis-server on port {self.port}")
        return self

    def answers(self) -> bool:
        try:
            with redis.Redis(port=self.port, socket_connect_timeout=1) as client:
                return bool(client.ping())
        except (redis.RedisError, OSError):
            return False

    def pause(self, paused: bool = True) -> None:
        """Freeze the server (SIGSTOP) or let it go on (SIGCONT): connected, but silent."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGSTOP if paused else signal.SIGCONT)

    def kill(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait(timeout=10)
            self.proc = None
