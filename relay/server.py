"""Run the relay under uvicorn: one worker, uvloop, and httptools with the relay's own limits
(`relay.http_limits`).

The access log is off: it would record client addresses and mailbox fingerprints in clear
(what the relay logs itself names them through `relay.logsafe`).

uvicorn's WebSocket protocol (the one `ws="auto"` picks) is imported when the first push stream
opens, not when the relay starts: with the websockets library it is about a megabyte that a
relay nobody streams from never needs.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
import resource
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

from uvicorn.config import Config
from uvicorn.server import Server

from durable.errors import UserError
from relay.app import create_app
from relay.backends import StoreKind, StoreSpec, check_reachable, open_backend
from relay.clock import TEST_CLOCK_ENV, OffsetClock, relay_clock
from relay.config import HttpLimits, RelayConfig
from relay.http_limits import protocol_for
from relay.metrics import Metrics, serve_metrics

__all__ = ["RelayServer", "build_server", "serve"]

WS_MAX_SIZE = 64 * 1024  # a push stream's client never needs to send more than a close
SPARE_FILES = 64  # descriptors kept for the store, the metrics listener and the log
log = logging.getLogger("talk.relay")


def open_files_limit() -> int:
    """Raise this process's soft limit on open files to its hard limit (systemd's LimitNOFILE,
    or the shell's `ulimit -Hn`); many hosts start services at a soft 1,024."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or hard > soft:
        wanted = 1 << 20 if hard == resource.RLIM_INFINITY else hard
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
            soft = wanted
        except (ValueError, OSError):
            pass  # keep the soft limit; the connection cap below still fits under it
    return soft


def fit_connections(limits: HttpLimits, open_files: int) -> HttpLimits:
    """The connection cap, lowered when the open-files limit could not hold it: past that limit
    accept() fails and nobody, /healthz included, gets an answer."""
    room = max(1, open_files - SPARE_FILES)
    if limits.max_connections <= room:
        return limits
    log.warning("relay: --max-connections %d lowered to %d to fit the open-files limit %d "
                "(raise LimitNOFILE or ulimit -n)", limits.max_connections, room, open_files)
    return dataclasses.replace(limits, max_connections=room)


def deferred_websockets(**kwargs: Any) -> asyncio.Protocol:
    """uvicorn's WebSocket protocol for one upgraded connection, its module imported on first use."""
    from uvicorn.protocols.websockets.auto import AutoWebSocketsProtocol

    if AutoWebSocketsProtocol is None:  # websockets is a dependency: only a broken install lands here
        raise RuntimeError("no WebSocket library is installed: reinstall talk-mailbox")
    return AutoWebSocketsProtocol(**kwargs)


class RelayServer(Server):
    """uvicorn's server, telling `on_stopped` once its graceful shutdown is done (uvicorn then
    re-raises the signal that stopped it, so nothing after `run` would get to say so)."""

    def __init__(self, config: Config, on_stopped: Callable[[], None] = lambda: None) -> None:
        super().__init__(config)
        self.on_stopped = on_stopped

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        await super().shutdown(sockets)
        self.on_stopped()


def build_server(
    host: str, port: int, spec: StoreSpec | Path, config: RelayConfig, metrics_port: int | None = None,
    on_stopped: Callable[[], None] = lambda: None,
) -> Server:
    """`spec` may be a bare path: the SQLite file (what `talk demo` runs on).

    With `metrics_port`, Prometheus metrics are served on that loopback port (a separate listener,
    so the public port never exposes them).
    """
    if isinstance(spec, Path):
        spec = StoreSpec(StoreKind.SQLITE, str(spec))
    metrics = None
    if metrics_port is not None:  # first: a port in use must not leave a new store file behind
        metrics = Metrics()
        serve_metrics(metrics, metrics_port)
    store, hub = open_backend(spec)
    limits = fit_connections(config.http, open_files_limit())
    clock = relay_clock(os.environ)
    if isinstance(clock, OffsetClock):
        log.warning("relay: %s is set: expiry follows the test clock in %s; never set it in service",
                    TEST_CLOCK_ENV, clock.path)
    app = create_app(store, config, hub, metrics, str(spec.kind), clock)
    uv_config = Config(
        app,
        host=host,
        port=port,
        http=protocol_for(limits),
        ws=cast("type[asyncio.Protocol]", deferred_websockets),  # uvicorn only calls it
        access_log=False,
        log_level="warning",
        ws_max_size=WS_MAX_SIZE,
        ws_per_message_deflate=False,  # ciphertext does not compress; deflate only costs CPU
        server_header=False,
        # uvicorn would otherwise take X-Forwarded-For from loopback peers as the client address;
        # whether that header is trusted is the relay's call (`behind_proxy`), made in one place.
        proxy_headers=False,
    )
    return RelayServer(uv_config, on_stopped)


def listen(host: str, port: int) -> socket.socket:
    """The listening socket, bound before anything else starts.

    Raises:
        UserError: the address cannot be had (in use, not ours, not an address).
    """
    try:
        return socket.create_server((host, port), backlog=2048)
    except OSError as exc:
        raise UserError(f"cannot listen on {host}:{port} ({exc.strerror or exc}); pick another --port "
                        "or --host, or stop what uses it") from exc


def serve(
    host: str, port: int, spec: StoreSpec, config: RelayConfig, metrics_port: int | None = None,
    on_ready: Callable[[], None] = lambda: None, on_stopped: Callable[[], None] = lambda: None,
) -> None:
    """Bind, check the store, then (`on_ready`: the "listening" line) serve until stopped
    (`on_stopped`: the last line).

    Raises:
        UserError: the port or the store cannot be had; nothing was said to be listening.
    """
    sock = listen(host, port)
    try:
        check_reachable(spec)
        server = build_server(host, port, spec, config, metrics_port, on_stopped)
    except BaseException:
        sock.close()
        raise
    on_ready()
    server.run(sockets=[sock])
