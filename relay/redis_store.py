"""The shared store: one Redis server behind several relay replicas.

Every piece of state the relay keeps lives here, so any replica can answer any request. Mail
is kept per mailbox (see `relay.redis_scripts` for the layout), so fetching one mailbox costs
the same however many others there are; nothing on a request's path scans the keyspace.

Every method raises `relay.store.StoreUnavailable` when Redis does not answer
(`relay.redis_link`).

Expiry: nonces and invite slots carry native Redis TTLs and vanish on their own. Mail does not:
its TTL is the relay's setting, known to `purge` (and `fetch`'s `since`), and a blob dropped by
Redis behind the store's back would leave the mailbox's count, byte total and indexes wrong.
"""

from __future__ import annotations

import math
from typing import Any

from redis.asyncio import Redis

from relay import redis_scripts
from relay.redis_files import RedisFiles
from relay.redis_link import connect, guarded, in_batches, pipelined
from relay.redis_pipeline import ScriptPipeline
from relay.store import MOST_TAGS, Announce, Claimed, Deposited, DepositOutcome, Mail, RedeemOutcome

PURGE_BATCH = 500  # blobs per purge script call, so one sweep never blocks Redis for long
INVITE_GRACE_S = 86400  # a used or expired slot answers "used"/"expired" this long, as in SQLite
LAST_EXPIRY_MS = 253402300799000  # the end of year 9999: Redis refuses later expiry times


def _num(value: float) -> str:
    """A float as text Lua's tonumber and Python's float() read back exactly."""
    return repr(float(value))


def _mail_ids(ids: list[str]) -> list[str]:
    """The ids that can name mail, in the canonical form the store holds them in ("007" -> "7")."""
    return [str(int(i)) for i in ids if i.isascii() and i.isdigit() and len(i) <= 18]


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


def _slot_expiry_ms(expires: float) -> int:
    return max(1, min(LAST_EXPIRY_MS, math.floor((expires + INVITE_GRACE_S) * 1000)))


class RedisStore:
    def __init__(self, url: str, prefix: str = "talk:") -> None:
        self.prefix = prefix
        self.redis: Redis = connect(url)
        self._pipeline = ScriptPipeline(self.redis)  # a deposit's and a fetch's scripts
        register = self.redis.register_script
        self._deposit = register(redis_scripts.DEPOSIT)
        self._redeem = register(redis_scripts.REDEEM)
        self._fetch = register(redis_scripts.FETCH)
        self._ack = register(redis_scripts.ACK)
        self._purge = register(redis_scripts.PURGE)
        self._create_invite = register(redis_scripts.CREATE_INVITE)
        self._register = register(redis_scripts.REGISTER)
        self._purge_unknown = register(redis_scripts.PURGE_UNKNOWN)
        self._revoke_invite = register(redis_scripts.REVOKE_INVITE)
        self._put_ratchet = register(redis_scripts.PUT_RATCHET)
        self._claim_ratchet = register(redis_scripts.CLAIM_RATCHET)
        self.files = RedisFiles(self.redis, prefix)

    def _key(self, *parts: str) -> str:
        return self.prefix + ":".join(parts)

    @guarded
    async def put_bundle(self, fp: str, bundle: str) -> None:
        await self.redis.set(self._key("bundle", fp), bundle)

    @guarded
    async def get_bundle(self, fp: str) -> str | None:
        value = await self.redis.get(self._key("bundle", fp))
        return None if value is None else _text(value)

    @pipelined
    async def deposit(
        self, fp: str, tag: str, blob: bytes, now: float, max_messages: int, max_bytes: int,
        max_unknown: int | None = None, max_unknown_bytes: int | None = None,
        max_tag: int | None = None, max_tag_bytes: int | None = None,
        announce: Announce | None = None, registered: bool = False,
    ) -> Deposited:
        # `announce` and `registered` go unused: the script looks the tag up, stores the mail and,
        # under a registered tag, tells the replicas in the same step (`woken`), all in one round
        # trip; the relay wakes the owner for the rest itself.
        args: list[Any] = [self.prefix, fp, tag, blob, _num(now), max_messages, max_bytes,
                           max_unknown or max_messages, max_unknown_bytes or max_bytes,
                           max_tag or 0, max_tag_bytes or 0]
        answer = await self._pipeline.run(self._deposit, args)
        if isinstance(answer, bytes):
            return Deposited(DepositOutcome(answer.decode()), "")
        return Deposited(DepositOutcome.STORED, answer[0].decode(), bool(answer[1]))

    @guarded
    async def register_tags(self, fp: str, tags: list[str], most: int) -> None:
        await self._register(args=[self.prefix, fp, most, *tags])

    @guarded
    async def is_registered(self, fp: str, tag: str) -> bool:
        return bool(await self.redis.sismember(self._key("known", fp), tag))

    @guarded
    async def purge_unknown(self, fp: str) -> int:
        return int(await self._purge_unknown(args=[self.prefix, fp]))

    async def fetch(self, fp: str, tags: list[str], limit: int, since: float) -> list[Mail]:
        return (await self.next_page(fp, [], tags, limit, since))[1]

    @pipelined
    async def next_page(
        self, fp: str, ack: list[str], tags: list[str], limit: int, since: float
    ) -> tuple[int, list[Mail]]:
        numeric = _mail_ids(ack)
        args: list[Any] = [self.prefix, fp, _num(since), limit, len(numeric), *numeric, *tags]
        deleted, *flat = await self._pipeline.run(self._fetch, args)
        return int(deleted), [
            Mail(flat[i].decode(), flat[i + 2].decode(), bytes(flat[i + 3]), float(flat[i + 1]))
            for i in range(0, len(flat), 4)
        ]

    @guarded
    async def ack(self, fp: str, ids: list[str]) -> int:
        numeric = _mail_ids(ids)
        if not numeric:
            return 0
        return int(await self._ack(args=[self.prefix, fp, *numeric]))

    @guarded
    async def remember_nonce(self, fp: str, nonce: str, now: float, window: float) -> bool:
        seconds = max(1, math.ceil(window))
        return bool(await self.redis.set(self._key("nonce", fp, nonce), b"1", nx=True, ex=seconds))

    @guarded
    async def create_invite(
        self, fp: str, tag: str, expires: float, most_tags: int = MOST_TAGS
    ) -> None:
        args: list[Any] = [fp, _num(expires), _slot_expiry_ms(expires), self.prefix, most_tags, tag]
        await self._create_invite(keys=[self._key("invite", tag)], args=args)

    @guarded
    async def revoke_invite(self, fp: str, tag: str) -> bool:
        return bool(await self._revoke_invite(keys=[self._key("invite", tag)], args=[fp]))

    @guarded
    async def invite_owner(self, tag: str) -> str | None:
        value = await self.redis.hget(self._key("invite", tag), "fp")
        return None if value is None else _text(value)

    @guarded
    async def redeem_invite(
        self, tag: str, blob: bytes, now: float, max_messages: int, max_bytes: int
    ) -> RedeemOutcome:
        args: list[Any] = [self.prefix, tag, blob, _num(now), max_messages, max_bytes]
        return RedeemOutcome((await self._redeem(args=args)).decode())

    @guarded
    async def put_ratchet(
        self, fp: str, card: str, fallback: str | None, one_time: list[tuple[int, str]], most: int
    ) -> int | None:
        pairs = [part for key_id, key in one_time for part in (str(key_id), key)]
        keys = [self._key("ratchet", fp), self._key("otk", fp)]
        left = int(await self._put_ratchet(keys=keys, args=[card, fallback or "", most, *pairs]))
        return None if left < 0 else left

    @guarded
    async def ratchet_card(self, fp: str) -> str | None:
        value = await self.redis.hget(self._key("ratchet", fp), "card")
        return None if value is None else _text(value)

    @guarded
    async def claim_ratchet(self, fp: str) -> Claimed | None:
        answer = await self._claim_ratchet(keys=[self._key("ratchet", fp), self._key("otk", fp)])
        if answer is None:
            return None
        if len(answer) == 1:
            return Claimed(_text(answer[0]), None, False)
        return Claimed(_text(answer[0]), _text(answer[1]), bool(answer[2]))

    async def purge(self, now: float, ttl: float) -> int:
        cutoff = _num(now - ttl)

        @guarded
        async def sweep(batch: int) -> tuple[int, int]:
            swept, removed = await self._purge(args=[self.prefix, cutoff, batch])
            return int(swept), int(removed)

        return await in_batches(PURGE_BATCH, sweep)

    @guarded
    async def stored(self) -> int:
        return int(await self.redis.zcard(self._key("age")))

    @guarded
    async def ping(self) -> None:
        await self.redis.ping()

    async def close(self) -> None:
        await self.redis.aclose()
