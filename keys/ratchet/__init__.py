"""Olm pairwise forward secrecy: account, signed card, envelope, sessions, in-flight copies, late mail.

The face (`__all__`): every module but `late`, which only the sessions use."""

from __future__ import annotations

from durable.faces import face

__all__ = ("account", "card", "envelope", "inflight", "sessions")
__getattr__ = face(__name__, __all__)
