"""The follower's random delays: how it backs off from a relay that fails (`RETRY`, see
`durable.backoff`), and the random pause its own deposits wait after the fetch that caused them."""

from __future__ import annotations

import random
from collections.abc import Callable

from durable.backoff import Backoff

__all__ = ["DEPOSIT_DELAY_ENV", "RETRY", "deposit_delay"]

RETRY = Backoff(base_s=0.25, cap_s=10.0)


DEPOSIT_DELAY_ENV = "TALK_DEPOSIT_JITTER"
DEPOSIT_DELAY_S = (0.05, 2.0)
MAX_DEPOSIT_DELAY_S = 60.0


def deposit_delay_range(spec: str | None) -> tuple[float, float]:
    """`MIN,MAX` seconds (TALK_DEPOSIT_JITTER; tests shorten or lengthen it), else the default.

    A follower's own deposits (receipts, resends) wait a random time in this range, so the
    relay cannot pair a deposit with the fetch that caused it by their timing alone.
    """
    try:
        low, high = (float(part) for part in (spec or "").split(","))
    except ValueError:
        return DEPOSIT_DELAY_S
    if not 0 <= low <= high <= MAX_DEPOSIT_DELAY_S:
        return DEPOSIT_DELAY_S
    return low, high


def deposit_delay(spec: str | None, rand: Callable[[], float] = random.random) -> float:
    low, high = deposit_delay_range(spec)
    return low + rand() * (high - low)
