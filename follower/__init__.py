"""The relay client and the fetch → open → hand on → ack loop built on it."""
