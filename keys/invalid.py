"""The refusal of a field a peer sent (`keys.gate` and the gates beside it raise it)."""

from __future__ import annotations

__all__ = ["Invalid"]


class Invalid(ValueError):
    """A field a peer sent is not of its shape; `str()` says which and why."""
