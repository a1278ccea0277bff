"""What taking one message came to (`Outcome`), what a whole take reports (`Report`), and the
callback that hands a message on (`Emit`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
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


@dataclass
class Report:
    delivered: int = 0
    duplicates: int = 0
    held: int = 0
    receipts: int = 0
    refused: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
