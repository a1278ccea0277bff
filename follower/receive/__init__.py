"""Receiving: fetch, open, decide (admission, sequence, `follower.policy`), hand on or
hold (`follower.held`), remember, ack."""
