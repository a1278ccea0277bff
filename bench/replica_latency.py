"""Delivery latency through two relay replicas on one Redis, next to one relay, same run.

Two `talk relay --store redis://…` processes share a Redis key prefix. Alice always deposits
through replica A. Bob's follower listens first on A's push stream (the single-relay case, the
baseline), then on B's, so each wake-up has to cross Redis pub/sub between replicas. Latency
is deposit returned → line in bob's spool, messages sent one at a time (bench/latency.py's
measurement). The issue's target: the two-replica p50 within 2x of the single-relay p50.

    .venv/bin/python bench/replica_latency.py [--messages 100] [--redis redis://127.0.0.1:6379/0]

Ends with one JSON line {"single_p50_ms":…,"replica_p50_ms":…,"ratio":…,…}. The run's Redis
keys are deleted afterwards (never FLUSHDB); every process is stopped by its PID.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import uuid
from pathlib import Path

from common import Agent, BenchError, Deadline, Relay, befriend, find_talk, make_agent, pct, relay_env
from latency import PUSH_PAUSE_S, bob_stop, measure, wait_push_connected
from relay_throughput import delete_redis_keys


def follow_through(bob: Agent, relay: Relay, deadline: Deadline) -> None:
    bob.ok(deadline, "stop")
    bob.ok(deadline, "follow", "--peer", "alice", "--relay", relay.url)
    wait_push_connected(bob, deadline)


def run(args: argparse.Namespace) -> dict[str, float]:
    deadline = Deadline(args.timeout)
    talk = find_talk()
    prefix = f"talk-bench-{uuid.uuid4().hex[:8]}:"
    store = f"{args.redis}?prefix={prefix}"
    with tempfile.TemporaryDirectory(prefix="talk-bench-") as tmp:
        root = Path(tmp)
        a = Relay(talk, root / "a" / "unused.db", root / "a.log", relay_env(), store=store)
        b = Relay(talk, root / "b" / "unused.db", root / "b.log", relay_env(), store=store)
        try:
            a.start(deadline)
            b.start(deadline)
            alice = make_agent(talk, root, a, "alice", None, deadline)
            bob = make_agent(talk, root, a, "bob", None, deadline)
            befriend(alice, bob, deadline)
            # Hundreds of messages a minute on purpose: above bob's default receive limit.
            bob.ok(deadline, "policy", "alice", "--receive-rate", "100000", "--yes")
            follow_through(bob, a, deadline)
            single = measure(alice, bob, a, args.messages, deadline, PUSH_PAUSE_S)
            follow_through(bob, b, deadline)
            replicas = measure(alice, bob, a, args.messages, deadline, PUSH_PAUSE_S)
        finally:
            bob_stop(root)
            a.stop()
            b.stop()
            delete_redis_keys(prefix)
    p50, r50 = statistics.median(single), statistics.median(replicas)
    return {"single_p50_ms": round(p50, 2), "single_p99_ms": round(pct(single, 0.99), 2),
            "replica_p50_ms": round(r50, 2), "replica_p99_ms": round(pct(replicas, 0.99), 2),
            "ratio": round(r50 / p50, 2) if p50 > 0 else float("inf"), "messages": len(single)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=100)
    parser.add_argument("--redis", default="redis://127.0.0.1:6379/0")
    parser.add_argument("--timeout", type=float, default=600.0)
    args = parser.parse_args()
    try:
        result = run(args)
    except BenchError as exc:
        print(f"replica_latency: {exc}", file=sys.stderr)
        return 1
    print(f"{'case':<22}{'p50 ms':>10}{'p99 ms':>10}", file=sys.stderr)
    print(f"{'one relay (A)':<22}{result['single_p50_ms']:>10}{result['single_p99_ms']:>10}",
          file=sys.stderr)
    print(f"{'A -> Redis -> B':<22}{result['replica_p50_ms']:>10}{result['replica_p99_ms']:>10}",
          file=sys.stderr)
    print(f"two replicas / one relay (p50): {result['ratio']}x (target <= 2x)", file=sys.stderr)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
