"""How many waiting messages a hook can hand over whole, and the receipt that earns them.

A host shows a hook's text to the model only up to some length (measured per host and event);
past it the text is cut, or saved to a file with a preview. A hook therefore takes the longest
run of waiting messages whose framed text fits, for `delivered`, and leaves the rest for a later
hook. Where no later hook would do better (the last resort of a turn), one message too long to
fit goes anyway, for the receipt the host's handling of it deserves (`written`).
"""

from __future__ import annotations

from alarms.framing import frame
from alarms.handover import Fit
from durable.receipt_states import Receipt
from spool_writer.record import SpoolRecord


def fit_within(limit: int, overflow: Receipt | None = None, channel: str | None = None) -> Fit:
    """A `pending.take` fit: the longest prefix whose frame (on `channel`, see `frame`) is at
    most `limit` characters, for `delivered`; when not even one fits, nothing (`overflow` None)
    or one, earning `overflow`."""
    def fit(records: list[SpoolRecord]) -> tuple[int, Receipt | None]:
        n = len(records)
        while n and len(frame(records[:n], channel=channel)) > limit:
            n -= 1
        if n:
            return n, Receipt.DELIVERED
        return (0, None) if overflow is None else (1, overflow)
    return fit
