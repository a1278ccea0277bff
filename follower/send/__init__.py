"""Sending: number, seal (ratchet or sealed box), keep in the outbox, deposit; resend; wait for receipts."""
