"""The follower process: the daemon loop, its upkeep, and its state on disk."""

from __future__ import annotations

from durable.faces import face

__all__ = ("daemon", "state")
__getattr__ = face(__name__, __all__)
