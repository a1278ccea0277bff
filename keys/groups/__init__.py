"""Megolm group keys and the membership book: the book, the group keys, the signed group text.

The face (`__all__`): all three; the follower's group mail uses each."""

from __future__ import annotations

from durable.faces import face

__all__ = ("book", "sessions", "text")
__getattr__ = face(__name__, __all__)
