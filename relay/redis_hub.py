"""Wake-ups across relay replicas: Redis pub/sub in front of each replica's `LocalHub`.

One channel for all mailboxes (`PREFIX notify`, messages "FP TAG", or "FP TAG ID BLOB" when the
blob rides along: `relay.notify.notice`), not one per mailbox:
each replica subscribes once, before it serves, so a stream is listening the moment it says
"ready" — a per-mailbox SUBSCRIBE would be sent after the stream opened, and mail deposited
in between would wake nobody. The price is that every replica hears every deposit's ~70 bytes
(and its blob, when small enough to push) and drops those for mailboxes with no stream here: a
dictionary lookup, cheap next to the deposit itself, at any size a handful of replicas serve.

A notification is only a copy of stored mail. Pub/sub drops messages while a replica is disconnected from
Redis, so after reconnecting the hub wakes every local stream once; a follower then fetches.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from redis.asyncio import Redis
from redis.asyncio.client import PubSub
from redis.exceptions import RedisError

from relay.notify import LocalHub, Notice, notice
from relay.redis_link import connect, guarded
from relay.redis_scripts import NOTIFY

log = logging.getLogger("talk.relay")
RETRY_S = 0.5


def announcement(fp: str, told: Notice) -> bytes:
    """The channel message for `told` (what `redis_scripts.DEPOSIT` publishes, too)."""
    head = f"{fp} {told.tag}"
    return f"{head} {told.mail_id} ".encode() + told.blob if told.mail_id else head.encode()


def parse_message(data: bytes | str) -> tuple[str, Notice] | None:
    """(fingerprint, notice) from a notification, or None for anything malformed."""
    raw = data.encode() if isinstance(data, str) else data
    parts = raw.split(b" ", 3)
    try:
        fp, tag = parts[0].decode(), parts[1].decode()
        mail_id = parts[2].decode() if len(parts) == 4 else ""
    except (IndexError, UnicodeDecodeError):
        return None
    if not fp:
        return None
    return fp, notice(tag, mail_id, parts[3]) if mail_id else Notice(tag)


class RedisHub:
    def __init__(self, url: str, prefix: str = "talk:") -> None:
        self.channel = prefix + NOTIFY  # where `RedisStore.deposit` announces, too
        self.redis: Redis = connect(url)  # publishes: bounded like the store's requests
        self.listener: Redis = connect(url)  # waits for messages without a time limit
        self._local = LocalHub()
        self._task: asyncio.Task[None] | None = None

    def subscribe(self, fp: str) -> asyncio.Queue[Notice]:
        return self._local.subscribe(fp)

    def unsubscribe(self, fp: str, queue: asyncio.Queue[Notice]) -> None:
        self._local.unsubscribe(fp, queue)

    def streams(self, fp: str) -> int:
        return self._local.streams(fp)

    @guarded
    async def publish(self, fp: str, tag: str, mail_id: str = "", blob: bytes = b"") -> None:
        # Through Redis even for this replica's own streams: one path, one delivery each.
        await self.redis.publish(self.channel, announcement(fp, notice(tag, mail_id, blob)))

    async def start(self) -> None:
        pubsub = self.listener.pubsub(ignore_subscribe_messages=True)
        await pubsub.subscribe(self.channel)
        self._task = asyncio.create_task(self._listen(pubsub))

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        await self.redis.aclose()
        await self.listener.aclose()

    async def _listen(self, pubsub: PubSub) -> None:
        try:
            while True:
                try:
                    async for message in pubsub.listen():
                        await self._deliver(message.get("data", b""))
                except (RedisError, OSError) as exc:
                    log.warning("relay: lost the Redis notification channel (%s); reconnecting", exc)
                await asyncio.sleep(RETRY_S)  # also when listen() ends: never spin
                await self._reconnect(pubsub)
        finally:
            await pubsub.aclose()  # type: ignore[no-untyped-call, unused-ignore]  # untyped before redis-py 8.2

    async def _reconnect(self, pubsub: PubSub) -> None:
        with contextlib.suppress(RedisError, OSError):
            await pubsub.subscribe(self.channel)
            for fp in self._local.mailboxes():
                self._local.tell(fp, Notice(""))  # whatever was published meanwhile is lost

    async def _deliver(self, data: bytes | str) -> None:
        parsed = parse_message(data)
        if parsed is not None:
            self._local.tell(*parsed)
