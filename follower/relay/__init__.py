"""The connection to a relay: the client, its HTTP/1.1 transport, the push stream, backoff.

The face: `client`, `push` and `backoff`; the HTTP/1.1 transport is the client's inside.
"""

from __future__ import annotations

from durable.faces import face

__all__ = ("backoff", "client", "push")
__getattr__ = face(__name__, __all__)
