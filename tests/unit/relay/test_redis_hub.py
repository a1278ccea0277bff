"""relay.redis_hub: what one replica announces, every replica reads back the same; a replica
listens for exactly the mailboxes it holds streams of, from the moment a stream is ready."""

from __future__ import annotations

import asyncio
import secrets
from typing import Any

import pytest
from redis import Redis

from relay.notify import Notice
from relay.redis_hub import RedisHub, announcement, parse_message
from relay.redis_store import RedisStore
from tests.redis_support import REDIS_URL, redis_prefix
from tests.unit.relay.conftest import Run

NOW = 1_800_000_000.25
BIG = 1_000_000


def hexid() -> str:
    return secrets.token_hex(16)


@pytest.mark.parametrize("told", [Notice("ab"), Notice("ab", "12", b"sealed blob with spaces \x00\xff")])
def test_an_announcement_reads_back_as_the_notice_it_came_from(told: Notice) -> None:
    assert parse_message(announcement("fp1", told)) == ("fp1", told)


def test_the_deposit_scripts_form_and_malformed_ones() -> None:
    assert parse_message("fp1 ab") == ("fp1", Notice("ab"))  # a bare wake-up
    assert parse_message(b"fp1 ab 3 ") == ("fp1", Notice("ab", "3", b""))
    for junk in (b"", b"fp1", b" ab", b"\xff\xfe ab"):
        assert parse_message(junk) is None


def test_a_stream_hears_its_mailbox_from_ready_on_and_no_replica_hears_the_others(
    redis_url: str, run: Run[Any]
) -> None:
    with redis_prefix() as prefix:
        store, hub = RedisStore(redis_url, prefix), RedisHub(redis_url, prefix)
        run(hub.start())
        try:
            mine, other, tag = hexid(), hexid(), hexid()
            run(store.register_tags(mine, [tag], 10))
            run(store.register_tags(other, [tag], 10))
            queue = hub.subscribe(mine)
            run(hub.ready(mine))
            assert subscribers(hub.mailbox_channel(mine)) == 1
            assert subscribers(hub.mailbox_channel(other)) == 0  # nobody to wake: nobody hears it
            run(store.deposit(other, tag, b"theirs", NOW, BIG, BIG))
            stored = run(store.deposit(mine, tag, b"mine", NOW, BIG, BIG))
            run(asyncio.wait_for(queue.wait(), 5))
            assert queue.take() == [Notice(tag, stored.id, b"mine")]
        finally:
            run(hub.stop())
            run(store.close())


def test_the_last_stream_gone_stops_the_listening_and_a_new_one_starts_it_again(
    redis_url: str, run: Run[Any]
) -> None:
    async def streams(hub: RedisHub, fp: str) -> None:
        channel = hub.mailbox_channel(fp)
        first, second = hub.subscribe(fp), hub.subscribe(fp)
        await asyncio.gather(hub.ready(fp), hub.ready(fp))
        hub.unsubscribe(fp, first)
        await asyncio.sleep(0.05)
        assert subscribers(channel) == 1  # one stream left
        hub.unsubscribe(fp, second)
        again = hub.subscribe(fp)  # in the same turn: the drop must not undo this one
        await hub.ready(fp)
        await hub.publish(fp, "t")
        await asyncio.wait_for(again.wait(), 5)
        assert again.take() == [Notice("t")]
        hub.unsubscribe(fp, again)
        for _ in range(100):
            if subscribers(channel) == 0:
                return
            await asyncio.sleep(0.02)
        raise AssertionError("still listening 2 s after the last stream went")

    with redis_prefix() as prefix:
        hub = RedisHub(redis_url, prefix)
        run(hub.start())
        try:
            run(streams(hub, hexid()))
        finally:
            run(hub.stop())


def subscribers(channel: bytes) -> int:
    with Redis.from_url(REDIS_URL) as client:
        return int(dict(client.pubsub_numsub(channel))[channel])
