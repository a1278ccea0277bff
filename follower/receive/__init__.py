"""Receiving: fetch, open, decide (admission, sequence, `follower.policy`), hand on or
hold (`follower.held`), remember, ack."""

from __future__ import annotations

from durable.faces import face

__all__ = ("admission", "channeldb", "inbound", "outcome", "quarantine", "receipts")
__getattr__ = face(__name__, __all__)
