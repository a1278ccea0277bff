"""The relay: stores sealed blobs by (mailbox, tag) and forgets each once its owner acks it.

It never holds a private key or a byte of plaintext; all state lives in a `Store`.

The face (`__all__`, see `durable.faces`), what the command line runs a relay with:

    backends   which store (and hub) a relay runs on, from one string
    config     the relay's limits and settings (RelayConfig, HttpLimits)
    limits     rates (Rate) and the trusted proxies' networks
    server     build_server, serve: the relay under uvicorn

Everything else (the app, the stores, the hot path) is the relay's inside.
"""

from __future__ import annotations

from durable.faces import face

__all__ = ("backends", "config", "limits", "server")
__getattr__ = face(__name__, __all__)
