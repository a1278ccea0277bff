"""Retry delays: exponential with full jitter, so many followers do not return in step."""

from __future__ import annotations

import random
from collections.abc import Callable

BASE_S = 0.25
CAP_S = 10.0


def delay(attempt: int, rand: Callable[[], float] = random.random) -> float:
    """Seconds to wait before try number `attempt` (1-based) after a failure."""
    ceiling = min(CAP_S, BASE_S * 2.0 ** min(attempt, 16))
    return ceiling / 2 + rand() * ceiling / 2
