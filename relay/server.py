"""Run the relay under uvicorn: one worker, uvloop and httptools when installed.

The access log is off: it would record client addresses and mailbox fingerprints in clear.
"""

from __future__ import annotations

from pathlib import Path

import uvicorn

from relay.app import create_app
from relay.config import RelayConfig
from relay.sqlite_store import SqliteStore


def build_server(host: str, port: int, db: Path, config: RelayConfig) -> uvicorn.Server:
    app = create_app(SqliteStore(db), config)
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


def serve(host: str, port: int, db: Path, config: RelayConfig) -> None:
    build_server(host, port, db, config).run()
