"""Wake-ups across relay replicas: Redis pub/sub in front of each replica's `LocalHub`.

One channel per mailbox (`PREFIX notify:FP`, messages "FP TAG", or "FP TAG ID BLOB" when the
blob rides along: `relay.notify.notice`), listened to by a replica only while it holds a stream
of that mailbox: a deposit is heard by the replicas that have someone to wake and by no other,
where one channel for all made every replica read every deposit (and its blob) to drop most.
A stream says "ready" only once Redis has confirmed the SUBSCRIBE (`RedisHub.ready`), so mail
deposited after that point wakes it; the confirmations come back in the order the SUBSCRIBEs
went, on the one listening connection, which is how each is matched to its waiter. The replica
also listens on `PREFIX notify` itself, always: it keeps the listening connection subscribed
(redis-py stops reading one that has no channel) and is what a reconnection re-subscribes by.

A notification is only a copy of stored mail. Pub/sub drops messages while a replica is disconnected from
Redis, so after reconnecting the hub wakes every local stream once; a follower then fetches.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from typing import Any

from redis.asyncio import Redis
from redis.asyncio.client import PubSub
from redis.exceptions import RedisError

from relay.notify import LocalHub, Notice, Wakeups, notice
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
    tells_at_once = False  # a publish reaches even this replica's streams through Redis

    def __init__(self, url: str, prefix: str = "talk:") -> None:
        self.channel = prefix + NOTIFY  # always listened to; mailboxes' channels add ":FP"
        self.redis: Redis = connect(url)  # publishes: bounded like the store's requests
        self.listener: Redis = connect(url)  # waits for messages without a time limit
        self._pubsub: PubSub = self.listener.pubsub()
        self._local = LocalHub()
        self._task: asyncio.Task[None] | None = None
        self._listened: set[bytes] = set()  # mailbox channels SUBSCRIBEd and not UNSUBSCRIBEd since
        # Per channel, one future for each SUBSCRIBE sent and not yet confirmed, oldest first.
        self._unconfirmed: dict[bytes, deque[asyncio.Future[None]]] = {}
        self._sending = asyncio.Lock()  # (un)subscriptions leave in the order they were decided
        self._dropping: set[asyncio.Task[None]] = set()  # held until done: the loop keeps weak ones

    def mailbox_channel(self, fp: str) -> bytes:
        """Where a deposit into `fp` is announced (what `redis_scripts.DEPOSIT` publishes to)."""
        return f"{self.channel}:{fp}".encode()

    def subscribe(self, fp: str) -> Wakeups:
        return self._local.subscribe(fp)

    @guarded
    async def ready(self, fp: str) -> None:
        channel = self.mailbox_channel(fp)
        async with self._sending:
            waiting = self._unconfirmed.setdefault(channel, deque())
            if channel not in self._listened:
                waiting.append(asyncio.get_running_loop().create_future())
                try:
                    await self._pubsub.subscribe(channel)
                except BaseException:
                    waiting.pop()
                    raise
                self._listened.add(channel)
            if not waiting:
                del self._unconfirmed[channel]
                return
            confirmed = waiting[-1]
        await asyncio.shield(confirmed)  # a waiter that gives up must not cancel it for the others

    def unsubscribe(self, fp: str, queue: Wakeups) -> None:
        self._local.unsubscribe(fp, queue)
        if not self._local.streams(fp):
            task = asyncio.ensure_future(self._drop(fp))
            self._dropping.add(task)
            task.add_done_callback(self._dropping.discard)

    async def _drop(self, fp: str) -> None:
        """Stop listening for `fp`, unless a stream of it opened meanwhile."""
        channel = self.mailbox_channel(fp)
        async with self._sending:
            if self._local.streams(fp) or channel not in self._listened:
                return
            self._listened.discard(channel)
            with contextlib.suppress(RedisError, OSError):  # reconnecting re-subscribes the rest
                await self._pubsub.unsubscribe(channel)

    def streams(self, fp: str) -> int:
        return self._local.streams(fp)

    @guarded
    async def publish(self, fp: str, tag: str, mail_id: str = "", blob: bytes = b"") -> None:
        # Through Redis even for this replica's own streams: one path, one delivery each.
        await self.redis.publish(self.mailbox_channel(fp), announcement(fp, notice(tag, mail_id, blob)))

    async def start(self) -> None:
        await self._pubsub.subscribe(self.channel)
        self._task = asyncio.create_task(self._listen(self._pubsub))

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        for task in list(self._dropping):
            task.cancel()
        await self.redis.aclose()
        await self.listener.aclose()

    async def _listen(self, pubsub: PubSub) -> None:
        try:
            while True:
                try:
                    async for message in pubsub.listen():
                        self._heard(message)
                except (RedisError, OSError) as exc:
                    log.warning("relay: lost the Redis notification channel (%s); reconnecting", exc)
                await asyncio.sleep(RETRY_S)  # also when listen() ends: never spin
                await self._reconnect(pubsub)
        finally:
            await pubsub.aclose()  # type: ignore[no-untyped-call, unused-ignore]  # untyped before redis-py 8.2

    async def _reconnect(self, pubsub: PubSub) -> None:
        with contextlib.suppress(RedisError, OSError):
            await pubsub.subscribe(self.channel)  # reconnects, and redis-py re-subscribes the rest
            for fp in self._local.mailboxes():
                self._local.tell(fp, Notice(""))  # whatever was published meanwhile is lost

    def _heard(self, message: dict[str, Any]) -> None:
        kind = message.get("type")
        if kind == "subscribe":
            self._confirmed(message.get("channel", b""))
        elif kind == "message":
            parsed = parse_message(message.get("data", b""))
            if parsed is not None:
                self._local.tell(*parsed)

    def _confirmed(self, channel: bytes) -> None:
        """Redis confirmed a SUBSCRIBE to `channel`: the oldest one waiting (a re-subscription
        after a reconnection may confirm one whose own reply was lost; it listens all the same)."""
        waiting = self._unconfirmed.get(channel)
        if not waiting:
            return
        confirmed = waiting.popleft()
        if not waiting:
            del self._unconfirmed[channel]
        if not confirmed.done():
            confirmed.set_result(None)
