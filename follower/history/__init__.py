"""The read model a person sees (`talk show`): timeline, transcript, read marks, receive log."""

from __future__ import annotations

from durable.faces import face

__all__ = ("readmarks", "receivelog", "timeline", "transcript")
__getattr__ = face(__name__, __all__)
