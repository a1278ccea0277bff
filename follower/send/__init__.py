"""Sending: number, seal (ratchet inside a hybrid or classic sealed box), keep in the outbox,
deposit; resend; wait for receipts; files sealed in chunks and uploaded before the message that
announces them."""

from __future__ import annotations

from durable.faces import face

__all__ = ("cancel", "kem_keys", "outbound", "outbox", "queue_mark", "ratchet_keys", "ratchet_send",
           "resending", "sendrate", "seqcounter", "stall", "transfer", "upload", "waiting")
__getattr__ = face(__name__, __all__)
