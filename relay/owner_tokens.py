"""Owner tokens: a random key a mailbox's owner is lent, kept in this process's memory only.

A token is bought with one Ed25519-signed request and then authenticates requests with a MAC
(`keys.wire`). The wire calls it a session (the route, the header, `session_expired`); here it
is a token, so that "session" keeps meaning an agent's. Nothing here is persisted: a restarted
relay (or another replica) knows no token, answers 401 `session_expired`, and the client buys
a new one. That also makes replay across a restart impossible: the keys died with the process.
"""

from __future__ import annotations

import secrets
import time
from collections import OrderedDict
from dataclasses import dataclass

from keys.wire import SESSION_KEY_BYTES

TOKEN_TTL_S = 3600.0
MAX_TOKENS = 50_000  # ~10 MB; the oldest is forgotten first (its owner just buys another)
MAX_PER_MAILBOX = 16  # a mailbox's own followers, CLIs and tests; more replaces the oldest
WINDOW = 1024
WINDOW_MASK = (1 << WINDOW) - 1


@dataclass
class OwnerToken:
    """A token's nonces are counters (1, 2, 3, …), so replay protection is a sliding window
    of bits, as in IPsec: constant memory however many requests the token makes. A counter
    more than WINDOW behind the highest seen is refused as a replay (the client, which counts
    one by one, never falls that far behind itself)."""

    fp: str
    key: bytes
    expires: float
    highest: int = 0
    seen: int = 0  # bit i: counter `highest - i` was used

    def fresh_counter(self, counter: int) -> bool:
        """Record `counter`; False if it was used already or is too old to tell."""
        if counter < 1:
            return False
        if counter > self.highest:
            shift = counter - self.highest
            self.seen = ((self.seen << shift) | 1) & WINDOW_MASK if shift < WINDOW else 1
            self.highest = counter
            return True
        bit = 1 << (self.highest - counter)
        if bit > WINDOW_MASK or self.seen & bit:
            return False
        self.seen |= bit
        return True


class OwnerTokens:
    """The live tokens by id; the oldest go first past `most`, or past MAX_PER_MAILBOX of one owner."""

    def __init__(self, ttl_s: float = TOKEN_TTL_S, most: int = MAX_TOKENS) -> None:
        self.ttl_s = ttl_s
        self.most = most
        self._tokens: OrderedDict[str, OwnerToken] = OrderedDict()
        self._by_mailbox: dict[str, list[str]] = {}

    def open(self, fp: str, now: float | None = None) -> tuple[str, OwnerToken]:
        now = time.time() if now is None else now
        tid = secrets.token_hex(16)
        token = OwnerToken(fp, secrets.token_bytes(SESSION_KEY_BYTES), now + self.ttl_s)
        self._tokens[tid] = token
        mine = self._by_mailbox.setdefault(fp, [])
        mine.append(tid)
        while len(mine) > MAX_PER_MAILBOX:
            self._tokens.pop(mine.pop(0), None)
        while len(self._tokens) > self.most:
            old_tid, old = self._tokens.popitem(last=False)
            self._forget(old_tid, old.fp)
        return tid, token

    def get(self, tid: str, now: float | None = None) -> OwnerToken | None:
        """The live token `tid`, or None (unknown, forgotten or expired)."""
        token = self._tokens.get(tid)
        if token is None:
            return None
        if token.expires <= (time.time() if now is None else now):
            del self._tokens[tid]
            self._forget(tid, token.fp)
            return None
        return token

    def _forget(self, tid: str, fp: str) -> None:
        mine = self._by_mailbox.get(fp, [])
        if tid in mine:
            mine.remove(tid)
        if not mine:
            self._by_mailbox.pop(fp, None)

    def __len__(self) -> int:
        return len(self._tokens)
