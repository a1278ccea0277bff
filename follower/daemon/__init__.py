"""The follower process: the daemon loop, its upkeep, and its state on disk.

The face: `daemon` (the Follower, which `python -m follower` runs), `state` (its config, status
and log), `liveness` (its lock: whether one runs) and `keyagent` (the key it holds after `talk unlock`).
"""

from __future__ import annotations

from durable.faces import face

__all__ = ("daemon", "keyagent", "liveness", "state", "uploads")
__getattr__ = face(__name__, __all__)
