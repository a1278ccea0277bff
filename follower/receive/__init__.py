"""Receiving: fetch, open, decide (admission, sequence, `follower.policy`), hand on or
hold (`follower.held`), remember, ack.

The face: the modules the Account, the daemon and the CLI use; `faults`, `joining`, `ordering`,
`recovery`, `sequence` and `spool_line` are the receiver's inside.
"""

from __future__ import annotations

from durable.faces import face

__all__ = ("admission", "channeldb", "inbound", "outcome", "parking", "quarantine", "receipts")
__getattr__ = face(__name__, __all__)
