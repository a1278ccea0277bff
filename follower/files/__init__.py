"""Receiving files: a message that announces them waits (`parked`), with their keys, while a
taker (`taker`) downloads each (`download`: chunks fetched, opened, written to a private partial
file, checked) and places it under a safe name (`names`); then the message is handed on.

The face: the modules the receiver, the follower and the CLI use.
"""

from __future__ import annotations

from durable.faces import face

__all__ = ("download", "names", "parked", "taker")
__getattr__ = face(__name__, __all__)
