"""Run the relay under uvicorn: one worker, uvloop and httptools when installed.

The access log is off: it would record client addresses and mailbox fingerprints in clear.
"""

from __future__ import annotations

from pathlib import Path

import uvicorn

from relay.app import create_app
from relay.backends import StoreKind, StoreSpec, open_backend
from relay.config import RelayConfig


def build_server(
    host: str, port: int, spec: StoreSpec | Path, config: RelayConfig
) -> uvicorn.Server:
    """`spec` may be a bare path: the SQLite file (what `talk demo` runs on)."""
    if isinstance(spec, Path):
        spec = StoreSpec(StoreKind.SQLITE, str(spec))
    store, hub = open_backend(spec)
    app = create_app(store, config, hub)
    uv_config = uvicorn.Config(
        app,
        host=host,
        port=port,
        access_log=False,
        log_level="warning",
        ws_per_message_deflate=False,  # ciphertext does not compress; deflate only costs CPU
        server_header=False,
    )
    return uvicorn.Server(uv_config)


def serve(host: str, port: int, spec: StoreSpec, config: RelayConfig) -> None:
    build_server(host, port, spec, config).run()
