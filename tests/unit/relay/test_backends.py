"""relay.backends: which store a relay runs on, from --store, --db or TALK_RELAY_STORE."""

from __future__ import annotations

from pathlib import Path

import pytest

from relay.backends import DEFAULT_PREFIX, StoreKind, StoreSpec, choose_store, parse_store

DEFAULT_DB = Path("talk-home/relay.db")


def test_sqlite_and_redis_specs_parse() -> None:
    assert parse_store("sqlite:data/relay.db") == StoreSpec(StoreKind.SQLITE, "data/relay.db")
    assert parse_store("redis://store.example:6379/2") == StoreSpec(StoreKind.REDIS, "redis://store.example:6379/2")
    assert parse_store("rediss://h:6380/0").kind is StoreKind.REDIS
    assert parse_store("unix:///run/redis.sock").kind is StoreKind.REDIS


def test_the_prefix_leaves_the_url_and_other_query_parameters_stay() -> None:
    spec = parse_store("redis://h:6379/0?prefix=team-a:&socket_timeout=3")
    assert spec == StoreSpec(StoreKind.REDIS, "redis://h:6379/0?socket_timeout=3", "team-a:")
    assert parse_store("redis://h:6379/0?prefix=a:&prefix=b:").prefix == "b:"  # the last one counts
    assert parse_store("redis://h:6379/0").prefix == DEFAULT_PREFIX
    assert spec.describe() == "redis://h:6379/0?socket_timeout=3 prefix team-a:"


@pytest.mark.parametrize("spec", ["", "relay.db", "sqlite:", "postgres://h/db", "redis:h:6379", "mysql:x"])
def test_an_unknown_store_says_what_to_write(spec: str) -> None:
    with pytest.raises(ValueError, match="use sqlite:PATH or redis://HOST:PORT/DB"):
        parse_store(spec)


def test_an_empty_prefix_is_refused_rather_than_sharing_every_key() -> None:
    with pytest.raises(ValueError, match="prefix must not be empty"):
        parse_store("redis://h:6379/0?prefix=")


def test_choose_store_takes_a_flag_then_the_environment_then_the_default_file() -> None:
    assert choose_store(None, Path("r.db"), "redis://h/0", DEFAULT_DB) == StoreSpec(
        StoreKind.SQLITE, "r.db")
    assert choose_store("redis://h/1", None, "redis://h/0", DEFAULT_DB).target == "redis://h/1"
    assert choose_store(None, None, "redis://h/0", DEFAULT_DB).target == "redis://h/0"
    assert choose_store(None, None, None, DEFAULT_DB) == StoreSpec(StoreKind.SQLITE, str(DEFAULT_DB))
    assert choose_store(None, None, "", DEFAULT_DB).target == str(DEFAULT_DB)  # set but empty
    with pytest.raises(ValueError, match="not both"):
        choose_store("sqlite:/a", Path("/b"), None, DEFAULT_DB)
