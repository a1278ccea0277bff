"""Settings read from the environment: tests shorten expiry, backoff and resend times through them.

The sender (waiting for receipts) and the follower's upkeep both read `TALK_RESEND_AFTER`, so
the one reading lives below both.
"""

from __future__ import annotations

import os

__all__ = ["env_float"]


def env_float(name: str, default: float) -> float:
    """A positive number from the environment variable `name`, else `default` (unset, not a
    number, zero or negative)."""
    try:
        value = float(os.environ.get(name, ""))
    except ValueError:
        return default
    return value if value > 0 else default
