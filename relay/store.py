"""The store interface every backend implements (SQLite now; Redis for several replicas).

Methods are async so a networked store fits the same shape; decisions that need no I/O
(limits, auth verdicts) live in the app and in `keys.wire`.

Known and unknown tags. Anyone may deposit under any tag, so a mailbox keeps two quotas: one
for mail under tags its owner has registered (named in an owner-authenticated fetch, or an
invite slot it opened) and a small one for every other tag. Junk under random tags fills only
the second. When the owner registers a tag, the mail already waiting under it moves to the
first. The relay still learns only that the owner reads a tag, never whose tag it is.

Fair shares. Each registered tag is one contact's channel to the owner, and one channel may
hold at most its share of the first quota (`max_tag`, `max_tag_bytes`): a contact that writes
while the owner is offline fills its own share, and the rest stays room for the others.

Outages. A backend that cannot reach its store raises `StoreUnavailable` from any method, and
the relay answers 503 `store_unavailable` with Retry-After: a fault of the relay's machine,
never of the request, so the client keeps what it sent and tries again.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import NamedTuple, Protocol

from relay.file_store import FileStore

MOST_TAGS = 10_000  # registered tags per mailbox, unless the relay is configured otherwise


RETRY_AFTER_S = 2  # what a 503 store_unavailable tells the client to wait
# Tells a deposit's owner of it, by the id it is stored under (`Store.deposit`).
Announce = Callable[[str], Awaitable[None]]


class StoreUnavailable(Exception):
    """The store does not answer now (down, unreachable, still loading its data)."""


@dataclass(frozen=True)
class Mail:
    id: str
    tag: str
    blob: bytes
    created: float


class DepositOutcome(StrEnum):
    STORED = "stored"
    MAILBOX_FULL = "mailbox_full"
    UNKNOWN_FULL = "unknown_full"  # the quota for tags the owner has not registered is used up
    TAG_FULL = "tag_full"  # this registered tag holds its share of the mailbox already


class Deposited(NamedTuple):
    outcome: DepositOutcome
    id: str  # "" unless stored
    woken: bool = False  # the store itself told the owner's streams (see `Store.deposit`)


class RedeemOutcome(StrEnum):
    STORED = "stored"
    UNKNOWN = "unknown"  # never created, or revoked
    USED = "used"
    EXPIRED = "expired"
    MAILBOX_FULL = "mailbox_full"


class Claimed(NamedTuple):
    """What a claim of an identity's ratchet keys hands out (`Store.claim_ratchet`)."""

    card: str
    key: str | None  # a one-time key, else the fallback key; None when neither was published
    one_time: bool


class Store(Protocol):
    @property
    def files(self) -> FileStore:
        """File chunks, kept apart from mail (`relay.file_store`)."""
        ...

    async def put_bundle(self, fp: str, bundle: str) -> None: ...

    async def get_bundle(self, fp: str) -> str | None: ...

    async def deposit(
        self, fp: str, tag: str, blob: bytes, now: float, max_messages: int, max_bytes: int,
        max_unknown: int | None = None, max_unknown_bytes: int | None = None,
        max_tag: int | None = None, max_tag_bytes: int | None = None,
        announce: Announce | None = None, registered: bool = False,
    ) -> Deposited:
        """Store a blob unless its quota is full; return the outcome and the new id.

        A registered tag's mail counts against `max_messages`/`max_bytes`, and that one tag's
        against `max_tag`/`max_tag_bytes` (none by default); any other tag's against
        `max_unknown`/`max_unknown_bytes` (by default the same numbers, kept apart).
        A networked store whose hub it shares may announce mail under a registered tag in the
        same round trip (`woken`); the relay then publishes nothing more. A store that decides
        a deposit before writing it may call `announce` with the id in between (`woken` too):
        the owner hears of the mail while it is being written, and, should the write fail, the
        sender is answered with the error and sends it again (the owner's follower knows it).
        `registered`: the caller knows the tag registered (no tag ever stops being), so a store
        may take it as such without looking.
        """
        ...

    async def register_tags(self, fp: str, tags: list[str], most: int) -> None:
        """Mark `tags` as the owner's (at most `most` per mailbox); their waiting mail moves
        to the registered quota. Registering a tag twice changes nothing."""
        ...

    async def is_registered(self, fp: str, tag: str) -> bool: ...

    async def purge_unknown(self, fp: str) -> int:
        """Delete the mailbox's mail under tags never registered; return how many blobs went."""
        ...

    async def fetch(self, fp: str, tags: list[str], limit: int, since: float) -> list[Mail]:
        """Oldest first, only blobs created after `since` (older ones have expired)."""
        ...

    async def ack(self, fp: str, ids: list[str]) -> int: ...

    async def next_page(
        self, fp: str, ack: list[str], tags: list[str], limit: int, since: float
    ) -> tuple[int, list[Mail]]:
        """`ack(fp, ack)` then `fetch(fp, tags, limit, since)`: a follower's one request, in
        one round trip where the store is networked. Returns (deleted, mail)."""
        ...

    async def remember_nonce(self, fp: str, nonce: str, now: float, window: float) -> bool:
        """Record a request nonce; False if it was seen within `window` seconds (a replay)."""
        ...

    async def create_invite(
        self, fp: str, tag: str, expires: float, most_tags: int = MOST_TAGS
    ) -> None:
        """Open an invite slot; its tag is registered for the owner (redemptions are expected)."""
        ...

    async def revoke_invite(self, fp: str, tag: str) -> bool: ...

    async def invite_owner(self, tag: str) -> str | None:
        """The mailbox an invite slot delivers to, if the slot exists."""
        ...

    async def redeem_invite(
        self, tag: str, blob: bytes, now: float, max_messages: int, max_bytes: int
    ) -> RedeemOutcome: ...

    async def put_ratchet(
        self, fp: str, card: str, fallback: str | None, one_time: list[tuple[int, str]], most: int
    ) -> int | None:
        """Keep the owner's ratchet card (replacing the last), its fallback key if one is given
        (likewise), and those of the one-time keys, given as (id, key), whose id is above every
        id published for `fp` before: a retried or replayed publication never puts back a key
        that was handed out. Returns how many one-time keys are waiting; None, storing nothing,
        when that would be more than `most`. Already-checked signatures are the caller's job."""
        ...

    async def ratchet_card(self, fp: str) -> str | None:
        """`fp`'s published ratchet card, taking nothing out; None when it published none."""
        ...

    async def claim_ratchet(self, fp: str) -> Claimed | None:
        """Hand out `fp`'s card with its oldest one-time key, deleting that key in the same
        step, so no two claims ever get the same one; the fallback key (kept) once none are
        left. None when `fp` published no card."""
        ...

    async def purge(self, now: float, ttl: float) -> int:
        """Delete expired mail, nonces and invite slots; return how many blobs went."""
        ...

    async def stored(self) -> int:
        """How many undelivered blobs the store holds, over all mailboxes (a gauge's sample)."""
        ...

    async def ping(self) -> None: ...

    async def close(self) -> None: ...
