"""What taking one message came to (`Outcome`), what a whole take reports (`Report`), and the
callback that hands a message on (`Emit`)."""

from __future__ import annotations

from collections.abc import Callable
from enum import StrEnum
from typing import Any

__all__ = ["Emit", "Report"]

Emit = Callable[[dict[str, Any]], None]


class Outcome(StrEnum):
    DELIVERED = "delivered"
    DUPLICATE = "duplicate"
    REFUSED = "refused"  # security: tampered, unknown sender
    STALE_INVITE = "stale_invite"  # a request for an invite that is used, revoked or expired
    HELD = "held"  # kept aside by policy or rate, not handed on
    DECLINED = "declined"  # refused by policy or the hop limit (the sender gets a receipt)
    RECEIPT = "receipt"  # a receipt for our own mail: into the outbox
    CONTROL = "control"  # a group change: into the group book, never handed on
    PARKED = "parked"  # its files come first (`follower.receive.parking`), then it is handed on


class Report:
    """Counts of what a take came to; `refused` and `notes` are lines for the person who ran it.
    (A plain class: see `follower`'s docstring.)"""

    def __init__(self) -> None:
        self.delivered = 0
        self.duplicates = 0
        self.held = 0
        self.receipts = 0
        self.parked = 0
        self.refused: list[str] = []
        self.notes: list[str] = []

    def __repr__(self) -> str:
        return f"Report({self.__dict__})"
