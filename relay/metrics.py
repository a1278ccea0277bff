"""Prometheus metrics of one relay process, kept only when the operator asks for them.

A relay started with a metrics port counts (`Metrics`: an increment costs about a microsecond)
and `serve_metrics` opens the separate loopback listener. Without one it counts nothing
(`Meter`), and prometheus_client is never imported: nobody could read the counts, and the
library would hold its share of the relay's memory for as long as the relay runs.

Each `Metrics` has its own registry, so several apps in one process (tests) never collide. No
label carries a mailbox, tag or address: metrics stay as blind as the log.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, Protocol

from starlette.types import ASGIApp, Receive, Scope, Send

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)


class Count(Protocol):
    def inc(self, amount: float = 1) -> None: ...


class Level(Count, Protocol):
    def dec(self, amount: float = 1) -> None: ...

    def set(self, value: float) -> None: ...


class ByLabel(Protocol):
    def labels(self, *values: str) -> Count: ...


class _Idle:
    """Every instrument at once, counting nothing."""

    def inc(self, amount: float = 1) -> None:
        pass

    def dec(self, amount: float = 1) -> None:
        pass

    def set(self, value: float) -> None:
        pass

    def labels(self, *values: str) -> _Idle:
        return self


class Meter:
    """What the relay counts, as it counts without a metrics port: nothing."""

    deposits: Count
    deposit_bytes: Count
    deliveries: Count
    acks: Count
    streams: Level
    stored: Level
    errors: ByLabel

    def __init__(self) -> None:
        idle = _Idle()
        self.deposits = self.deposit_bytes = self.deliveries = self.acks = idle
        self.streams = self.stored = idle
        self.errors = idle

    def observe(self, route: str, seconds: float) -> None:
        """One request's latency under its route's name."""


class Metrics(Meter):
    """The relay's counts in a Prometheus registry of their own."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, ProcessCollector

        self.registry = registry or CollectorRegistry()
        r = self.registry
        ProcessCollector(registry=r)  # memory, CPU, open files: what an operator graphs first
        self.deposits = Counter("talk_relay_deposits", "Blobs deposited (mail and redeemed invites)",
                                registry=r)
        self.deposit_bytes = Counter("talk_relay_deposit_bytes", "Bytes of deposited blobs", registry=r)
        self.deliveries = Counter("talk_relay_deliveries", "Blobs handed out by fetch", registry=r)
        self.acks = Counter("talk_relay_acks", "Blobs deleted by the owner's ack", registry=r)
        self.streams = Gauge("talk_relay_open_streams", "Push streams open on this process", registry=r)
        self.stored = Gauge("talk_relay_stored_messages",
                            "Undelivered blobs in the store, all mailboxes (sampled)", registry=r)
        self.errors = Counter("talk_relay_errors", "Error answers by code", ["code"], registry=r)
        self.latency = Histogram("talk_relay_request_seconds", "HTTP request latency by route",
                                 ["route"], buckets=LATENCY_BUCKETS, registry=r)
        self._timers: dict[str, Any] = {}  # a labelled child is looked up under a lock: do it once

    def observe(self, route: str, seconds: float) -> None:
        timer = self._timers.get(route)
        if timer is None:
            timer = self._timers[route] = self.latency.labels(route)
        timer.observe(seconds)


def serve_metrics(metrics: Metrics, port: int, host: str = "127.0.0.1") -> None:
    """Start the scrape listener in a daemon thread; loopback unless the operator says otherwise."""
    from prometheus_client import start_http_server

    try:
        start_http_server(port, addr=host, registry=metrics.registry)
    except OSError as exc:  # a port in use is the operator's to fix, not a traceback
        raise SystemExit(f"talk relay: cannot serve metrics on {host}:{port}: {exc}") from exc


class TimedRoutes:
    """ASGI middleware: observe each HTTP request's latency under its endpoint's name."""

    def __init__(self, app: ASGIApp, metrics: Metrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        try:
            await self.app(scope, receive, send)
        finally:
            # The router records the matched endpoint in the shared scope; an unknown path has none.
            route = getattr(scope.get("endpoint"), "__name__", "unmatched")
            self.metrics.observe(route, time.perf_counter() - start)
