"""The states a receipt can report for a message, in one place.

The receiving side's follower sends them (`follower.receive.receipts`), the gate checks them on arrival
(`keys.gate`), the sender's outbox ranks them (`follower.send.outbox`), and the doors name the two
they earn in the hand-over log (`spool_writer.handed`):

- `written`: a door handed the message over through a channel that gives no verdict (bytes
  accepted by a host's inbox socket, or output the host keeps in a file rather than showing whole);
- `delivered`: the host showed the message whole to its model (a hook's output it takes inline,
  or the transcript entry carrying the message's id).

Plain strings with no keys or I/O in them, so every layer can import them.
"""

from __future__ import annotations

from enum import StrEnum

__all__ = ["Receipt"]


class Receipt(StrEnum):
    HELD = "held"
    SPOOLED = "spooled"
    WRITTEN = "written"
    DELIVERED = "delivered"
    REFUSED = "refused"
    EXPIRED = "expired"
    DROPPED = "dropped"
    DUPLICATE = "duplicate"
