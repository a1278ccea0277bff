"""Owner sessions: a random key per session, kept in this process's memory only.

A session is opened by one Ed25519-signed request and then authenticates requests with a MAC
(`keys.wire`). Nothing here is persisted: a restarted relay (or another replica) knows no
session, answers 401 `session_expired`, and the client opens a new one. That also makes
replay across a restart impossible: the keys died with the process.
"""

from __future__ import annotations

import secrets
import time
from collections import OrderedDict
from dataclasses import dataclass

from keys.wire import SESSION_KEY_BYTES

SESSION_TTL_S = 3600.0
MAX_SESSIONS = 50_000  # ~10 MB; the oldest is forgotten first (its owner just opens another)
MAX_PER_MAILBOX = 16  # a mailbox's own followers, CLIs and tests; more replaces the oldest
WINDOW = 1024
WINDOW_MASK = (1 << WINDOW) - 1


@dataclass
class OwnerSession:
    """A session's nonces are counters (1, 2, 3, …), so replay protection is a sliding window
    of bits, as in IPsec: constant memory however many requests the session makes. A counter
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


class OwnerSessionTable:
    def __init__(self, ttl_s: float = SESSION_TTL_S, most: int = MAX_SESSIONS) -> None:
        self.ttl_s = ttl_s
        self.most = most
        self._sessions: OrderedDict[str, OwnerSession] = OrderedDict()
        self._by_mailbox: dict[str, list[str]] = {}

    def open(self, fp: str, now: float | None = None) -> tuple[str, OwnerSession]:
        now = time.time() if now is None else now
        sid = secrets.token_hex(16)
        session = OwnerSession(fp, secrets.token_bytes(SESSION_KEY_BYTES), now + self.ttl_s)
        self._sessions[sid] = session
        mine = self._by_mailbox.setdefault(fp, [])
        mine.append(sid)
        while len(mine) > MAX_PER_MAILBOX:
            self._sessions.pop(mine.pop(0), None)
        while len(self._sessions) > self.most:
            old_sid, old = self._sessions.popitem(last=False)
            self._forget(old_sid, old.fp)
        return sid, session

    def get(self, sid: str, now: float | None = None) -> OwnerSession | None:
        """The live session `sid`, or None (unknown, forgotten or expired)."""
        session = self._sessions.get(sid)
        if session is None:
            return None
        if session.expires <= (time.time() if now is None else now):
            del self._sessions[sid]
            self._forget(sid, session.fp)
            return None
        return session

    def _forget(self, sid: str, fp: str) -> None:
        mine = self._by_mailbox.get(fp, [])
        if sid in mine:
            mine.remove(sid)
        if not mine:
            self._by_mailbox.pop(fp, None)

    def __len__(self) -> int:
        return len(self._sessions)
