"""Deposit rate limits and the client address they key on: pure decisions, `now` passed in.

Buckets live in the relay process. With several replicas behind a load balancer each replica
enforces its own share: a client spread over N replicas gets up to N times the configured rate.
That is the intended trade: a limit meant to stop floods needs no round trip to the store.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

# Past this many keys, idle (refilled) buckets are swept: a full bucket and a missing one decide
# the same, so dropping it loses nothing, and a flood of fresh addresses cannot grow memory forever.
SWEEP_AT = 10_000


@dataclass(frozen=True)
class Rate:
    """`per_s` tokens a second, up to `burst` saved; `burst` 0 means unlimited."""

    per_s: float
    burst: float

    @classmethod
    def parse(cls, text: str) -> Rate:
        """`N/S` (N deposits per S seconds, burst N) or `N/S:B` (burst B); `off` for no limit."""
        if text.strip().lower() == "off":
            return OFF
        spec, _, burst = text.partition(":")
        count, sep, seconds = spec.partition("/")
        try:
            n, s = float(count), float(seconds) if sep else 1.0
            b = float(burst) if burst else n
        except ValueError:
            raise ValueError(f"bad rate {text!r}: write N/S or N/S:BURST, e.g. 20/1:100, or off") from None
        if not all(math.isfinite(x) and x > 0 for x in (n, s, b)):
            raise ValueError(f"bad rate {text!r}: every number must be positive")
        return cls(n / s, b)

    @property
    def unlimited(self) -> bool:
        return self.burst == 0


OFF = Rate(0.0, 0.0)


@dataclass
class TokenBucket:
    rate: Rate
    tokens: float
    stamp: float

    @classmethod
    def full(cls, rate: Rate, now: float) -> TokenBucket:
        return cls(rate, rate.burst, now)

    def refill(self, now: float) -> None:
        elapsed = max(0.0, now - self.stamp)  # a clock step backwards must not mint tokens
        self.tokens = min(self.rate.burst, self.tokens + elapsed * self.rate.per_s)
        self.stamp = max(self.stamp, now)

    def take(self, now: float) -> float:
        """Spend one token: 0.0 if allowed, else the seconds until one is there."""
        self.refill(now)
        if self.tokens >= 1.0:
            self.tokens -= 1.0
            return 0.0
        return (1.0 - self.tokens) / self.rate.per_s

    def is_full(self, now: float) -> bool:
        self.refill(now)
        return self.tokens >= self.rate.burst


@dataclass
class Limiter:
    """One token bucket per key (a client address, a mailbox tag)."""

    rate: Rate
    buckets: dict[str, TokenBucket] = field(default_factory=dict)
    sweep_at: int = SWEEP_AT

    def take(self, key: str, now: float) -> float:
        """0.0 if `key` may go on, else the seconds it should wait."""
        if self.rate.unlimited:
            return 0.0
        bucket = self.buckets.get(key)
        if bucket is None:
            if len(self.buckets) >= self.sweep_at:
                self.sweep(now)
            bucket = self.buckets[key] = TokenBucket.full(self.rate, now)
        return bucket.take(now)

    def sweep(self, now: float) -> None:
        self.buckets = {k: b for k, b in self.buckets.items() if not b.is_full(now)}
        # Everyone busy at once: grow the threshold so sweeps stay amortised O(1) per new key.
        self.sweep_at = max(SWEEP_AT, 2 * len(self.buckets))


def retry_after(wait_s: float) -> str:
    """A `Retry-After` value: whole seconds, at least 1, so a client never retries at once."""
    return str(max(1, math.ceil(wait_s)))


def client_address(peer: str | None, forwarded_for: str | None, behind_proxy: bool) -> str:
    """The peer address; behind a trusted proxy, the first `X-Forwarded-For` hop instead.

    Without `behind_proxy` the header is ignored: any client could write it to dodge its limit.
    """
    if behind_proxy and forwarded_for:
        first = forwarded_for.split(",", 1)[0].strip()
        if first:
            return first
    return peer or "unknown"
