"""The follower process: the daemon loop, its upkeep, and its state on disk.

The face: `daemon` (the Follower, which `python -m follower` runs) and `state` (its lock, status and log).
"""

from __future__ import annotations

from durable.faces import face

__all__ = ("daemon", "state")
__getattr__ = face(__name__, __all__)
