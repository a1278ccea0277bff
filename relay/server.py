"""Run the relay under uvicorn: one worker, uvloop and httptools when installed.

The access log is off: it would record client addresses and mailbox fingerprints in clear
(what the relay logs itself names them through `relay.logsafe`).
"""

from __future__ import annotations

from pathlib import Path

import uvicorn

from relay.app import create_app
from relay.backends import StoreKind, StoreSpec, open_backend
from relay.config import RelayConfig
from relay.metrics import Metrics, serve_metrics


def build_server(
    host: str, port: int, spec: StoreSpec | Path, config: RelayConfig, metrics_port: int | None = None
) -> uvicorn.Server:
    """`spec` may be a bare path: the SQLite file (what `talk demo` runs on).

    With `metrics_port`, Prometheus metrics are served on that loopback port (a separate listener,
    so the public port never exposes them).
    """
    if isinstance(spec, Path):
        spec = StoreSpec(StoreKind.SQLITE, str(spec))
    metrics = Metrics()
    if metrics_port is not None:  # first: a port in use must not leave a new store file behind
        serve_metrics(metrics, metrics_port)
    store, hub = open_backend(spec)
    app = create_app(store, config, hub, metrics, str(spec.kind))
    uv_config = uvicorn.Config(
        app,
        host=host,
        port=port,
        access_log=False,
        log_level="warning",
        ws_per_message_deflate=False,  # ciphertext does not compress; deflate only costs CPU
        server_header=False,
        # uvicorn would otherwise take X-Forwarded-For from loopback peers as the client address;
        # whether that header is trusted is the relay's call (`behind_proxy`), made in one place.
        proxy_headers=False,
    )
    return uvicorn.Server(uv_config)


def serve(
    host: str, port: int, spec: StoreSpec, config: RelayConfig, metrics_port: int | None = None
) -> None:
    build_server(host, port, spec, config, metrics_port).run()
