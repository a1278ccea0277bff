"""Which store (and hub) a relay runs on, from one string: `sqlite:PATH` or `redis://HOST:PORT/DB`.

A Redis URL may carry `?prefix=NAME:` (default `talk:`): every key and the notification channel
start with it, so several relays, or tests, can share one Redis server without meeting.
Replicas that serve the same mailboxes must use the same URL and prefix.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from durable.errors import UserError
from relay.notify import Hub, LocalHub
from relay.store import Store

__all__ = ["StoreKind", "StoreSpec", "check_reachable", "choose_store", "open_backend", "parse_store"]

REDIS_SCHEMES = ("redis", "rediss", "unix")
DEFAULT_PREFIX = "talk:"


class StoreKind(StrEnum):
    SQLITE = "sqlite"
    REDIS = "redis"


@dataclass(frozen=True)
class StoreSpec:
    kind: StoreKind
    target: str  # the SQLite file, or the Redis URL without the prefix
    prefix: str = DEFAULT_PREFIX

    def describe(self) -> str:
        return self.target if self.kind is StoreKind.SQLITE else f"{self.target} prefix {self.prefix}"


def _redis_spec(url: str) -> StoreSpec:
    parts = urlsplit(url)
    query = parse_qsl(parts.query, keep_blank_values=True)
    prefixes = [v for k, v in query if k == "prefix"]
    rest = urlencode([(k, v) for k, v in query if k != "prefix"])
    prefix = prefixes[-1] if prefixes else DEFAULT_PREFIX
    if not prefix:
        raise ValueError("the Redis key prefix must not be empty (drop ?prefix= for the default)")
    return StoreSpec(StoreKind.REDIS, urlunsplit(parts._replace(query=rest)), prefix)


def parse_store(spec: str) -> StoreSpec:
    """Raises ValueError with what to write instead."""
    scheme, sep, rest = spec.partition(":")
    if sep and scheme == "sqlite" and rest:
        return StoreSpec(StoreKind.SQLITE, rest)
    if sep and scheme in REDIS_SCHEMES and rest.startswith("//"):
        return _redis_spec(spec)
    raise ValueError(f"unknown store {spec!r}: use sqlite:PATH or redis://HOST:PORT/DB")


def choose_store(store: str | None, db: Path | None, env: str | None, default_db: Path) -> StoreSpec:
    """--store or --db (not both), else TALK_RELAY_STORE, else the SQLite file in TALK_HOME."""
    if store is not None and db is not None:
        raise ValueError("give --store or --db, not both (--db PATH means --store sqlite:PATH)")
    if db is not None:
        return StoreSpec(StoreKind.SQLITE, str(db))
    if store is not None or env:
        return parse_store(store or env or "")
    return StoreSpec(StoreKind.SQLITE, str(default_db))


def check_reachable(spec: StoreSpec, timeout_s: float = 5.0) -> None:
    """Before the relay says it listens: a Redis store must answer (a SQLite file is opened,
    and any fault in it reported, by `open_backend`).

    Raises:
        UserError: the store does not answer, saying where and what to check.
    """
    if spec.kind is not StoreKind.REDIS:
        return
    import redis

    client = redis.Redis.from_url(spec.target, socket_connect_timeout=timeout_s, socket_timeout=timeout_s)
    try:
        client.ping()
    except redis.RedisError as exc:
        raise UserError(f"the Redis store at {spec.target} does not answer ({exc}); start it, or "
                        "check --store") from exc
    finally:
        client.close()


def open_backend(spec: StoreSpec) -> tuple[Store, Hub]:
    if spec.kind is StoreKind.SQLITE:
        from relay.sqlite_store import SqliteStore

        return SqliteStore(Path(spec.target)), LocalHub()
    from relay.redis_hub import RedisHub
    from relay.redis_store import RedisStore

    return RedisStore(spec.target, spec.prefix), RedisHub(spec.target, spec.prefix)
