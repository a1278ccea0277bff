"""The store interface every backend implements (SQLite now; Redis for several replicas).

Methods are async so a networked store fits the same shape; decisions that need no I/O
(limits, auth verdicts) live in the app and in `keys.wire`.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol


@dataclass(frozen=True)
class Mail:
    id: str
    tag: str
    blob: bytes
    created: float


class DepositOutcome(StrEnum):
    STORED = "stored"
    MAILBOX_FULL = "mailbox_full"


class RedeemOutcome(StrEnum):
    STORED = "stored"
    UNKNOWN = "unknown"  # never created, or revoked
    USED = "used"
    EXPIRED = "expired"
    MAILBOX_FULL = "mailbox_full"


class Store(Protocol):
    async def put_bundle(self, fp: str, bundle: str) -> None: ...

    async def get_bundle(self, fp: str) -> str | None: ...

    async def deposit(
        self, fp: str, tag: str, blob: bytes, now: float, max_messages: int, max_bytes: int
    ) -> tuple[DepositOutcome, str]:
        """Store a blob unless the mailbox is at a cap; return the outcome and the new id."""
        ...

    async def fetch(self, fp: str, tags: list[str], limit: int, since: float) -> list[Mail]:
        """Oldest first, only blobs created after `since` (older ones have expired)."""
        ...

    async def ack(self, fp: str, ids: list[str]) -> int: ...

    async def remember_nonce(self, fp: str, nonce: str, now: float, window: float) -> bool:
        """Record a request nonce; False if it was seen within `window` seconds (a replay)."""
        ...

    async def create_invite(self, fp: str, tag: str, expires: float) -> None: ...

    async def revoke_invite(self, fp: str, tag: str) -> bool: ...

    async def invite_owner(self, tag: str) -> str | None:
        """The mailbox an invite slot delivers to, if the slot exists."""
        ...

    async def redeem_invite(
        self, tag: str, blob: bytes, now: float, max_messages: int, max_bytes: int
    ) -> RedeemOutcome: ...

    async def purge(self, now: float, ttl: float) -> int:
        """Delete expired mail, nonces and invite slots; return how many blobs went."""
        ...

    async def stored(self) -> int:
        """How many undelivered blobs the store holds, over all mailboxes (a gauge's sample)."""
        ...

    async def ping(self) -> None: ...

    async def close(self) -> None: ...
