"""Receiving: fetch, open, decide (admission, sequence, policy), hand on or hold, remember, ack."""
