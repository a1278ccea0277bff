"""Receiving files: where a file lands (`names`), and its download (`download`): chunks fetched,
opened, written to a private partial file, checked, placed.

The face: the modules the receiver and the CLI use.
"""

from __future__ import annotations

from durable.faces import face

__all__ = ("download", "names", "parked", "taker")
__getattr__ = face(__name__, __all__)
