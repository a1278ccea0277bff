"""Whether a message from a contact is spooled, held or refused: the pure decision.

The order matters: a forwarding loop is refused whatever the policy, a refused contact is
refused, a held contact is held, and only then does the receive rate hold the excess (held, not
dropped, so a burst loses nothing; one receipt per message says so).
"""

from __future__ import annotations

from collections import deque
from typing import Any, NamedTuple

from follower.policy import Policy, Rule
from keys.encoding import is_hex32

__all__ = ["MAX_HOPS"]

MAX_HOPS = 4


class Admission(NamedTuple):
    action: Policy  # what is done with this one message: the same three words as a policy
    reason: str = ""


def admit(rule: Rule, hops: list[str], over_rate: bool) -> Admission:
    if len(hops) > MAX_HOPS:
        return Admission(Policy.REFUSE, f"relayed through {len(hops)} hops; talk refuses more than "
                                      f"{MAX_HOPS} (a forwarding loop?)")
    if rule.policy is Policy.REFUSE:
        return Admission(Policy.REFUSE, "the recipient does not accept messages from you")
    if rule.policy is Policy.HOLD:
        return Admission(Policy.HOLD, "held until the recipient accepts it")
    if over_rate:
        return Admission(Policy.HOLD, f"over the receive limit of {rule.receive_per_min} a minute; "
                                    "held until the recipient releases it")
    return Admission(Policy.ACCEPT)


def hops_of(value: Any) -> list[str] | None:
    """The hop list an envelope carries: fingerprints, oldest first; None if malformed."""
    if value is None:
        return []
    if isinstance(value, list) and len(value) <= 64 and all(is_hex32(h) for h in value):
        return [str(h) for h in value]
    return None


class RateWindow:
    """Messages let through in the last minute, per contact (in memory: a restart forgets)."""

    def __init__(self) -> None:
        self._times: dict[str, deque[float]] = {}

    def over(self, who: str, limit: int, now: float) -> bool:
        times = self._times.setdefault(who, deque())
        while times and now - times[0] >= 60.0:
            times.popleft()
        return len(times) >= limit

    def count(self, who: str, now: float) -> None:
        self._times.setdefault(who, deque()).append(now)
