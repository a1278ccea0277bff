"""Rate limits and the client address they key on: pure decisions, `now` passed in.

Buckets live in the relay process. With several replicas behind a load balancer each replica
enforces its own share: a client spread over N replicas gets up to N times the configured rate.
That is the intended trade: a limit meant to stop floods needs no round trip to the store.
"""

from __future__ import annotations

import ipaddress
import math
from dataclasses import dataclass, field

__all__ = ["OFF", "Rate", "parse_networks"]

# Past this many keys, idle (refilled) buckets are swept: a full bucket and a missing one decide
# the same, so dropping it loses nothing, and a flood of fresh addresses cannot grow memory forever.
SWEEP_AT = 10_000
Network = ipaddress.IPv4Network | ipaddress.IPv6Network


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


@dataclass
class WakeThrottle:
    """At most one push wake-up per `interval_s` per mailbox for mail under tags its owner never
    registered: otherwise a junk flood wakes the owner's follower into a fetch for every blob,
    spending the owner's own request budget. A wake held back is sent once, at the end of its
    window, so a real message under a new tag is still announced within `interval_s`."""

    interval_s: float
    next_at: dict[str, float] = field(default_factory=dict)
    trailing: set[str] = field(default_factory=set)

    def take(self, key: str, now: float) -> float | None:
        """0.0: wake now; a delay: wake after it; None: a held-back wake is already due."""
        due = self.next_at.get(key, 0.0)
        if now >= due:
            if len(self.next_at) >= SWEEP_AT:
                self.next_at = {k: t for k, t in self.next_at.items() if t > now or k in self.trailing}
            self.next_at[key] = now + self.interval_s
            return 0.0
        if key in self.trailing:
            return None
        self.trailing.add(key)
        return due - now

    def fired(self, key: str, now: float) -> None:
        """The held-back wake went out: the next window starts now."""
        self.trailing.discard(key)
        self.next_at[key] = now + self.interval_s


def retry_after(wait_s: float) -> str:
    """A `Retry-After` value: whole seconds, at least 1, so a client never retries at once."""
    return str(max(1, math.ceil(wait_s)))


def client_address(
    peer: str | None, forwarded_for: str | None, behind_proxy: bool,
    trusted: tuple[Network, ...] = (),
) -> str:
    """The address a client's limits key on.

    Without `behind_proxy` it is the socket peer and `X-Forwarded-For` is ignored: any client
    could write that header to dodge its limit. Behind a proxy it is the rightmost hop that is
    not one of the `trusted` proxies: every proxy appends the address it saw, so hops to the
    right of the first untrusted one were written by our own proxies and the ones to its left
    by the client, who may write anything there. An IPv6 address counts as its /64, the block
    one subscriber is usually given.
    """
    if behind_proxy and forwarded_for:
        for hop in reversed(forwarded_for.split(",")):
            hop = hop.strip()
            if hop and not _within(hop, trusted):
                return _subscriber(hop)
    return _subscriber(peer) if peer else "unknown"



def parse_networks(text: str) -> tuple[Network, ...]:
    """`10.0.0.0/8, 192.0.2.7` → networks; raises ValueError naming the bad entry."""
    networks = []
    for item in filter(None, (part.strip() for part in text.split(","))):
        try:
            networks.append(ipaddress.ip_network(item, strict=False))
        except ValueError:
            raise ValueError(f"bad proxy address {item!r}: write an address or CIDR such as "
                             "10.0.0.0/8, comma-separated") from None
    return tuple(networks)


def _within(hop: str, trusted: tuple[Network, ...]) -> bool:
    if not trusted:
        return False
    try:
        address = ipaddress.ip_address(hop)
    except ValueError:
        return False
    return any(address in network for network in trusted)


def _subscriber(address: str) -> str:
    if ":" not in address:  # the common case, IPv4, costs no parsing
        return address
    try:
        v6 = ipaddress.IPv6Address(address)
    except ValueError:
        return address
    if v6.ipv4_mapped is not None:
        return str(v6.ipv4_mapped)
    return str(ipaddress.IPv6Network((int(v6) >> 64 << 64, 64)))
