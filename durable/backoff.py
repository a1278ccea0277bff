"""How long to wait before trying again after failures: exponential, capped, with equal jitter.

Try `n` (1-based, counting failures) waits a random time between half and all of
`min(cap, base * 2**n)`: the ceiling doubles with each failure until the cap, and the random
half spreads clients that failed together so they do not come back in step, while the fixed
half keeps a retry from coming back at once. ("Full jitter" would draw from zero up; this is
not that.)
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["Backoff"]


@dataclass(frozen=True)
class Backoff:
    base_s: float
    cap_s: float

    def delay(self, attempt: int, rand: Callable[[], float] = random.random) -> float:
        """Seconds to wait before try number `attempt` (1-based) after a failure."""
        ceiling = min(self.cap_s, self.base_s * 2.0 ** min(attempt, 16))
        return ceiling / 2 + rand() * ceiling / 2
