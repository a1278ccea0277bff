"""A relay under connection floods: its memory, its open files, and whether /healthz still answers.

One `talk relay` process on a free 127.0.0.1 port with its default limits. The flooding sockets
bind to 127.0.0.2 (all of 127/8 is loopback), /healthz is polled from 127.0.0.1 every 20 ms
throughout, and the relay's VmRSS and open descriptors are sampled from /proc every 20 ms:

  1. header flood  --connections (40) connections at once, each sending one request head of
                   --head-mb (10) MB: a single endless header. The relay cuts each one off at
                   its head limit (64 KiB, 431).
  2. half-open     --half-open (1,005) connections that send part of a request head, or
                   nothing, and then wait. The relay keeps answering others meanwhile; past the
                   per-address cap (512) it answers 503 at once, the rest it closes when the
                   header timeout (10 s) runs out.

    .venv/bin/python bench/relay_flood.py [--connections 40] [--head-mb 10] [--half-open 1005]

A table goes to stderr; stdout ends with one JSON line. Targets: peak RSS under 100 MB, every
/healthz answered 200, every half-open connection closed by the relay.
"""

from __future__ import annotations

import argparse
import json
import socket
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

from common import BenchError, Deadline, Relay, base_env, find_talk, stop_process

FLOOD_SOURCE = "127.0.0.2"
BLOCK = b"a" * 65536


class Watch:
    """Samples the relay's memory and descriptors and polls /healthz until stopped."""

    def __init__(self, relay: Relay) -> None:
        assert relay.proc is not None
        self.pid = relay.proc.pid
        self.url = relay.url + "/healthz"
        self.stop = threading.Event()
        self.rss_kb: list[int] = []
        self.fds: list[int] = []
        self.health: list[tuple[int, float]] = []  # (status, seconds); status 0: no answer
        self.threads = [threading.Thread(target=self._sample), threading.Thread(target=self._poll)]

    def __enter__(self) -> Watch:
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        for t in self.threads:
            t.join()

    def _sample(self) -> None:
        while not self.stop.is_set():
            self.rss_kb.append(vm_kb(self.pid, "VmRSS"))
            self.fds.append(len(list(Path(f"/proc/{self.pid}/fd").iterdir())))
            time.sleep(0.02)

    def _poll(self) -> None:
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        while not self.stop.is_set():
            start = time.perf_counter()
            try:
                with opener.open(self.url, timeout=5) as r:
                    status = r.status
            except OSError:
                status = 0
            self.health.append((status, time.perf_counter() - start))
            time.sleep(0.02)

    def summary(self) -> dict[str, Any]:
        waits = sorted(s for _, s in self.health)
        return {
            "peak_rss_mb": round(max(self.rss_kb) / 1024, 1),
            "peak_fds": max(self.fds),
            "healthz_polls": len(self.health),
            "healthz_not_200": sum(1 for status, _ in self.health if status != 200),
            "healthz_p99_ms": round(1000 * waits[int(0.99 * (len(waits) - 1))], 1) if waits else None,
        }


def vm_kb(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise BenchError(f"no {field} in /proc/{pid}/status")


def connect(port: int) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=30, source_address=(FLOOD_SOURCE, 0))


def flood_head(port: int, size: int, outcomes: list[str]) -> None:
    """Send a `size`-byte request head; record how far it got and what the relay answered."""
    sent = 0
    with connect(port) as s:
        try:
            s.sendall(b"GET /healthz HTTP/1.1\r\nHost: relay\r\nX-Flood: ")
            while sent < size:
                s.sendall(BLOCK)
                sent += len(BLOCK)
        except OSError:
            pass
        try:
            reply = s.recv(64)
        except OSError:
            reply = b""
    outcomes.append(f"{reply[:12].decode(errors='replace') or 'reset'} after {sent >> 10} KiB")


def header_flood(relay: Relay, connections: int, head_mb: int) -> dict[str, Any]:
    outcomes: list[str] = []
    with Watch(relay) as watch:
        time.sleep(0.2)  # a baseline sample first
        threads = [threading.Thread(target=flood_head, args=(relay.port, head_mb << 20, outcomes))
                   for _ in range(connections)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        time.sleep(0.2)
    cut = sum(1 for o in outcomes if o.startswith(("HTTP/1.1 431", "reset")))
    return {**watch.summary(), "connections": connections, "head_mb": head_mb, "cut_off": cut,
            "sample_outcome": outcomes[0] if outcomes else None}


def half_open(relay: Relay, count: int, timeout_s: float) -> dict[str, Any]:
    opened: list[socket.socket] = []
    closed_by_relay = refused_at_once = 0
    with Watch(relay) as watch:
        try:
            for i in range(count):
                s = connect(relay.port)
                opened.append(s)
                if i % 2:
                    s.sendall(b"GET /healthz HTTP/1.1\r\nHost: relay\r\n")
            start = time.monotonic()
            for s in opened:
                s.settimeout(max(1.0, timeout_s + 20 - (time.monotonic() - start)))
                try:
                    reply = s.recv(64)
                except OSError:
                    continue
                refused_at_once += reply.startswith(b"HTTP/1.1 503")
                closed_by_relay += reply == b"" or reply.startswith((b"HTTP/1.1 408", b"HTTP/1.1 503"))
            waited = time.monotonic() - start
        finally:
            for s in opened:
                s.close()
    return {**watch.summary(), "half_open": count, "closed_by_relay": closed_by_relay,
            "refused_503_at_once": refused_at_once, "all_closed_after_s": round(waited, 1)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--connections", type=int, default=40)
    parser.add_argument("--head-mb", type=int, default=10)
    parser.add_argument("--half-open", type=int, default=1005)
    parser.add_argument("--header-timeout", type=float, default=10.0, help="the relay's limit")
    parser.add_argument("--timeout", type=float, default=300.0)
    args = parser.parse_args()
    deadline = Deadline(args.timeout)
    with tempfile.TemporaryDirectory(prefix="talk-flood-") as tmp:
        root = Path(tmp)
        env = {**base_env(None), "TALK_RELAY_HEADER_TIMEOUT": str(args.header_timeout)}
        relay = Relay(find_talk(), root / "relay" / "relay.db", root / "relay.log", env)
        try:
            relay.start(deadline)
            assert relay.proc is not None
            idle_mb = round(vm_kb(relay.proc.pid, "VmRSS") / 1024, 1)
            heads = header_flood(relay, args.connections, args.head_mb)
            opened = half_open(relay, args.half_open, args.header_timeout)
        finally:
            proc, relay.proc = relay.proc, None
            stop_process(proc)
        log = relay.log_tail()
    print(f"idle RSS {idle_mb} MB", file=sys.stderr)
    for name, r in (("header flood", heads), ("half-open", opened)):
        print(f"{name:<13} peak RSS {r['peak_rss_mb']:>6} MB  peak fds {r['peak_fds']:>5}  "
              f"/healthz {r['healthz_polls']} polls, {r['healthz_not_200']} not 200, "
              f"p99 {r['healthz_p99_ms']} ms", file=sys.stderr)
    print(f"header flood: {heads['cut_off']}/{heads['connections']} cut off ({heads['sample_outcome']}); "
          f"half-open: {opened['closed_by_relay']}/{opened['half_open']} closed by the relay within "
          f"{opened['all_closed_after_s']} s ({opened['refused_503_at_once']} with 503 at once)",
          file=sys.stderr)
    tracebacks = log.count("Traceback")
    print(json.dumps({"idle_rss_mb": idle_mb, "header_flood": heads, "half_open": opened,
                      "tracebacks_in_log": tracebacks}))
    ok = (max(heads["peak_rss_mb"], opened["peak_rss_mb"]) < 100 and heads["healthz_not_200"] == 0
          and opened["healthz_not_200"] == 0 and opened["closed_by_relay"] == args.half_open)
    return 0 if ok else 1


if __name__ == "__main__":
    try:
        sys.exit(main())
    except BenchError as exc:
        print(f"relay_flood: {exc}", file=sys.stderr)
        sys.exit(1)
