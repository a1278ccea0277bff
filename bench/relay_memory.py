"""Relay memory with mail stored, and whether fetching one mailbox gets slower as mailboxes add up.

For each store (SQLite; Redis unless --skip-redis), one `talk relay` process on a free
127.0.0.1 port (deposit rate limits off, as in relay_throughput.py):

  1. idle      VmRSS of the relay after /healthz
  2. small     10 mailboxes (published key bundles) with 10 sealed blobs each; the median
               latency of a signed fetch of one mailbox (its 10 blobs, not acked), over
               --fetches fetches of randomly chosen mailboxes
  3. large     mailboxes added up to --mailboxes (default 10,000), 10 blobs each, deposited by
               --procs processes of 8 client threads: 100,000 undelivered blobs; VmRSS and
               VmHWM (peak) of the relay, then the same fetch median over all the mailboxes

Blobs are real sealed envelopes whose text pads to the 2 KiB bucket (2,168 bytes on the wire:
the smallest bucket above 1 KiB), one sealed per mailbox and deposited 10 times. RSS is read
from /proc/PID/status. With Redis the mail lives in the Redis server, not in the relay; the
server's `used_memory` growth is shown too (approximate: that server may be shared). The Redis
keys under the run's unique prefix are deleted afterwards (never FLUSHDB); every process started
is stopped by its PID.

    .venv/bin/python bench/relay_memory.py [--mailboxes 10000] [--per-mailbox 10] [--skip-redis]
                                          [--idle-only [--rounds 5]]

--idle-only measures phase 1 alone, --rounds times per store (a fresh relay each time, stores
taken in turn), and reports the median idle RSS with every round's figure.

A table goes to stderr; stdout ends with one JSON line (sqlite_* and redis_* keys).
Targets: idle RSS ≤ 35 MB (SQLite); RSS ≤ 80 MB with 100,000 stored; fetch latency flat from 10
to 10,000 mailboxes.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import random
import statistics
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from common import BenchError, Deadline, Relay, find_talk, relay_env
from relay_throughput import REDIS_URL, delete_redis_keys

from follower.relay.client import RelayClient
from keys.envelope import channel_tag, new_message, seal
from keys.identity import Identity
from keys.sodium import PublicKey

SMALL = 10
THREADS = 8
TEXT = "m" * 1000  # pads into the 2 KiB bucket


def status_mb(pid: int) -> dict[str, float]:
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        name, _, value = line.partition(":")
        if name in ("VmRSS", "VmHWM"):
            fields[name] = round(int(value.split()[0]) / 1024, 1)
    return fields


def redis_used_mb() -> float:
    from redis import Redis

    client = Redis.from_url(REDIS_URL)
    try:
        return round(int(client.info("memory")["used_memory"]) / 2**20, 1)
    finally:
        client.close()


class Mailbox:
    def __init__(self, sender: Identity, k: int) -> None:
        self.owner = Identity.generate(f"m{k}")
        peer = PublicKey(self.owner.box_public)
        self.tag = channel_tag(sender.box_secret, peer, self.owner.fingerprint)
        inner = new_message(sender.fingerprint, self.owner.fingerprint, TEXT)
        self.blob = seal(inner, sender.box_secret, peer)


def fill_worker(url: str, boxes: list[Mailbox], per_box: int, errors: Any) -> None:
    """Publish each mailbox's keys, then deposit its blob `per_box` times; 8 threads."""

    def run(part: list[Mailbox]) -> None:
        try:
            with RelayClient(url) as client:
                for box in part:
                    client.publish(box.owner.bundle())
                for _ in range(per_box):
                    for box in part:
                        client.deposit(box.owner.fingerprint, box.tag, box.blob)
        except Exception as exc:
            errors.put(str(exc))

    threads = [threading.Thread(target=run, args=(boxes[t::THREADS],)) for t in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def fill(url: str, boxes: list[Mailbox], per_box: int, procs: int) -> float:
    """Seconds to publish and fill `boxes`; raises on any client error."""
    ctx = mp.get_context("fork")
    errors: Any = ctx.Queue()
    start = time.monotonic()
    children = [ctx.Process(target=fill_worker, args=(url, boxes[p::procs], per_box, errors))
                for p in range(procs)]
    for c in children:
        c.start()
    for c in children:
        c.join(timeout=600)
    if not errors.empty():
        raise BenchError(f"filling the relay failed: {errors.get()}")
    return time.monotonic() - start


def fetch_median(url: str, boxes: list[Mailbox], per_box: int, count: int) -> float:
    times = []
    rng = random.Random(7)
    with RelayClient(url) as client:
        for _ in range(count):
            box = rng.choice(boxes)
            start = time.perf_counter()
            mail, _ = client.fetch(box.owner, [box.tag], 100)
            times.append((time.perf_counter() - start) * 1000)
            if len(mail) != per_box:
                raise BenchError(f"a fetch returned {len(mail)} blobs, expected {per_box}")
    return round(statistics.median(times), 3)


def measure(relay: Relay, args: argparse.Namespace, deadline: Deadline, redis: bool) -> dict[str, Any]:
    relay.start(deadline)
    assert relay.proc is not None
    pid = relay.proc.pid
    out: dict[str, Any] = {"idle_rss_mb": status_mb(pid)["VmRSS"]}
    if args.idle_only:
        return out
    redis_before = redis_used_mb() if redis else 0.0
    sender = Identity.generate("sender")
    boxes = [Mailbox(sender, k) for k in range(args.mailboxes)]
    fill(relay.url, boxes[:SMALL], args.per_mailbox, 1)
    out["small_rss_mb"] = status_mb(pid)["VmRSS"]
    out["fetch_10_ms"] = fetch_median(relay.url, boxes[:SMALL], args.per_mailbox, args.fetches)
    seconds = fill(relay.url, boxes[SMALL:], args.per_mailbox, args.procs)
    out["fill_deposits_per_s"] = round((len(boxes) - SMALL) * args.per_mailbox / seconds)
    mem = status_mb(pid)
    out["stored"] = len(boxes) * args.per_mailbox
    out["stored_rss_mb"], out["hwm_mb"] = mem["VmRSS"], mem["VmHWM"]
    out[f"fetch_{len(boxes)}_ms"] = fetch_median(relay.url, boxes, args.per_mailbox, args.fetches)
    out["after_fetch_rss_mb"] = status_mb(pid)["VmRSS"]
    if redis:
        out["redis_server_growth_mb"] = round(redis_used_mb() - redis_before, 1)
    out["fetch_ratio"] = round(out[f"fetch_{len(boxes)}_ms"] / out["fetch_10_ms"], 2)
    return out


def run(args: argparse.Namespace) -> dict[str, dict[str, Any]]:
    deadline = Deadline(args.timeout)
    talk = find_talk()
    results = {}
    with tempfile.TemporaryDirectory(prefix="talk-memory-") as tmp:
        root = Path(tmp)
        relay = Relay(talk, root / "sqlite" / "relay.db", root / "sqlite.log", relay_env())
        try:
            results["sqlite"] = measure(relay, args, deadline, redis=False)
            db = root / "sqlite"
            results["sqlite"]["db_files_mb"] = round(sum(f.stat().st_size for f in db.iterdir()) / 2**20, 1)
        finally:
            relay.stop()
        if not args.skip_redis:
            results["redis"] = measure_redis(root / "redis", talk, args, deadline)
    return results


def measure_redis(root: Path, talk: str, args: argparse.Namespace, deadline: Deadline) -> dict[str, Any]:
    prefix = f"talk-bench-{uuid.uuid4().hex[:12]}:"
    relay = Relay(talk, root / "unused.db", root / "relay.log", relay_env(),
                  store=f"{REDIS_URL}?prefix={prefix}")
    try:
        return measure(relay, args, deadline, redis=True)
    finally:
        relay.stop()
        delete_redis_keys(prefix)


def run_idle(args: argparse.Namespace) -> dict[str, dict[str, Any]]:
    """Idle RSS only, `--rounds` fresh relays per store, the stores taken in turn."""
    deadline = Deadline(args.timeout)
    talk = find_talk()
    rounds: dict[str, list[float]] = {"sqlite": [], "redis": []}
    with tempfile.TemporaryDirectory(prefix="talk-memory-") as tmp:
        root = Path(tmp)
        for k in range(args.rounds):
            relay = Relay(talk, root / f"sqlite{k}" / "relay.db", root / f"sqlite{k}.log", relay_env())
            try:
                rounds["sqlite"].append(measure(relay, args, deadline, redis=False)["idle_rss_mb"])
            finally:
                relay.stop()
            if not args.skip_redis:
                rounds["redis"].append(measure_redis(root / f"redis{k}", talk, args, deadline)["idle_rss_mb"])
    return {name: {"idle_rss_mb": statistics.median(figures), "idle_rss_rounds": figures}
            for name, figures in rounds.items() if figures}


def report(results: dict[str, dict[str, Any]]) -> dict[str, Any]:
    rows = sorted({k for r in results.values() for k in r})
    print(f"{'':<24}" + "".join(f"{name:>12}" for name in results), file=sys.stderr)
    for key in rows:
        cells = "".join(f"{r.get(key, '-')!s:>12}" for r in results.values())
        print(f"{key:<24}{cells}", file=sys.stderr)
    return {f"{name}_{k}": v for name, r in results.items() for k, v in r.items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mailboxes", type=int, default=10_000)
    parser.add_argument("--per-mailbox", type=int, default=10)
    parser.add_argument("--fetches", type=int, default=300)
    parser.add_argument("--procs", type=int, default=4)
    parser.add_argument("--skip-redis", action="store_true")
    parser.add_argument("--idle-only", action="store_true", help="measure idle RSS only (phase 1)")
    parser.add_argument("--rounds", type=int, default=5, help="relays started per store with --idle-only")
    parser.add_argument("--timeout", type=float, default=900.0)
    args = parser.parse_args()
    if args.mailboxes <= SMALL:
        parser.error(f"--mailboxes must be more than {SMALL}")
    try:
        results = run_idle(args) if args.idle_only else run(args)
    except BenchError as exc:
        print(f"relay_memory: {exc}", file=sys.stderr)
        return 1
    print(json.dumps({**report(results), "load": round(os.getloadavg()[0], 2)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
