"""Receipt latency: an alarm hands bob's agent the message → alice's `talk send --wait delivered` returns.

A real relay on loopback, alice and bob made contacts through the real CLI, bob's follower
running with one registered agent session. For each message alice runs
`talk send bob TEXT --wait delivered` as a process; once the line is in bob's session spool,
the benchmark takes it the way every alarm does (`alarms.mailbox.SessionMail.take`, which logs
the hand-over) and times how long alice's process needs to return after that. Two cases:

  follower   alice runs a follower too: it takes bob's receipt, the waiter watches her outbox
  alone      no follower on alice's side: the waiting `talk send` fetches its receipts itself

Baselines in the same run: one `talk status ID` process (the least a CLI needs to show a
state), and the floor of any event-driven path: a deposit into alice's mailbox until her push
stream wakes, plus one fetch of it (`floor_ms`). What a case takes beyond the floor is what is
left to win (`left_ms`, from the p50): the receipt's own hops (bob's follower noticing the
hand-over, sealing and depositing the receipt; alice's side opening it and writing her outbox)
and the waiter noticing that write.

Nothing waits on a timer: the bench waits for the message to show as spooled in alice's outbox
before the hand-over, so the figure is the delivered receipt alone.

    .venv/bin/python bench/receipt_latency.py [--messages 15]

Prints a table, then one JSON line {"p50_ms":…,"p99_ms":…,"alone_p50_ms":…,"status_ms":…,…}.
Target: `--wait delivered` returns within 1 s of the hand-over.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from common import Agent, BenchError, Deadline, Relay, befriend, find_talk, make_agent, pct, relay_env, timed

from alarms.mailbox import SessionMail
from follower.relay.client import RelayClient
from follower.relay.push import PushListener
from follower.send.outbox import Outbox
from keys import keystore


def in_session(bob: Agent, text: str) -> bool:
    spool = bob.home / "bob" / "spool" / "sessions" / "s1.ndjson"
    return spool.exists() and any(json.loads(x)["text"] == text for x in spool.read_text().splitlines())


def spooled(alice: Agent, text: str) -> bool:
    """Whether alice's outbox already says bob's follower spooled the message `text`."""
    entries = Outbox(alice.home / "alice").entries().values()
    return any(e.text == text and e.state in ("spooled", "delivered") for e in entries)


def floor(alice: Agent, relay: Relay, rounds: int, deadline: Deadline) -> list[float]:
    """ms from a deposit into alice's mailbox to her push stream's wake-up and one fetch."""
    me = keystore.unlock(keystore.load(alice.home / "alice"), None)
    wake = threading.Event()
    push = PushListener(relay.url, me, wake, lambda state: None)
    push.start()
    times = []
    try:
        with RelayClient(relay.url) as sender, RelayClient(relay.url, sessions=True) as owner:
            tag = "f" * 32
            owner.fetch(me, [tag])  # registered, as a receipt tag is: wakes come at once
            for i in range(rounds):
                while not wake.wait(0.01):  # the stream's "ready" first, then one wake per deposit
                    deadline.timeout()
                wake.clear()
                start = time.perf_counter()
                sender.deposit(me.fingerprint, tag, f"floor {i}".encode())
                while not wake.wait(0.01):
                    deadline.timeout()
                mail, _ = owner.fetch(me, [tag])
                times.append((time.perf_counter() - start) * 1000)
                owner.ack(me, [m.id for m in mail])
                wake.set()  # the next round's "ready"
    finally:
        push.stop()
    return times


def one(alice: Agent, bob: Agent, text: str, deadline: Deadline) -> float:
    """ms from the hand-over to the waiting `talk send` returning."""
    waiter = subprocess.Popen(alice.cmd("send", "bob", text, "--wait", "delivered", "--timeout", "30"),
                              env=alice.env(), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE)
    try:
        while not in_session(bob, text):
            deadline.timeout()
            if waiter.poll() is not None:
                err = waiter.stderr.read().decode() if waiter.stderr else ""
                raise BenchError(f"talk send exited early: {err}")
            time.sleep(0.002)
        while not spooled(alice, text):  # the spooled receipt first: the figure is the delivered one
            deadline.timeout()
            time.sleep(0.002)
        taken = SessionMail(bob.home / "bob", "s1").take()
        handed = time.perf_counter()
        if [r["text"] for r in taken] != [text]:
            raise BenchError(f"the alarm took {taken!r}")
        code = waiter.wait(timeout=deadline.timeout())
        returned = time.perf_counter()
    finally:
        if waiter.poll() is None:
            waiter.kill()
            waiter.wait()
    if code != 0:
        raise BenchError(f"talk send --wait delivered exited {code}")
    return (returned - handed) * 1000


def run(args: argparse.Namespace) -> dict[str, float]:
    deadline = Deadline(args.timeout)
    talk = find_talk()
    with tempfile.TemporaryDirectory(prefix="talk-bench-") as tmp:
        root = Path(tmp)
        relay = Relay(talk, root / "relay" / "relay.db", root / "relay.log", relay_env())
        relay.start(deadline)
        host = subprocess.Popen(["sleep", "3600"])
        alice = bob = None
        try:
            alice = make_agent(talk, root, relay, "alice", None, deadline)
            bob = make_agent(talk, root, relay, "bob", None, deadline)
            befriend(alice, bob, deadline)
            bob.ok(deadline, "session", "register", "--host", "other", "--id", "s1", "--pid", str(host.pid))
            bob.ok(deadline, "follow", "--peer", "alice")
            floors = floor(alice, relay, args.messages, deadline)
            alone = [one(alice, bob, f"alone {i}", deadline) for i in range(args.messages)]
            alice.ok(deadline, "follow", "--peer", "bob")
            followed = [one(alice, bob, f"followed {i}", deadline) for i in range(args.messages)]
            msg = json.loads(alice.ok(deadline, "outbox", "--json"))[-1]["id"]
            status = [timed(alice.cmd("status", msg), alice.env(), deadline, "talk status")[0]
                      for _ in range(args.messages)]
        finally:
            for agent in (alice, bob):
                if agent is not None:
                    subprocess.run(agent.cmd("stop"), env=agent.env(), capture_output=True, timeout=30)
            host.kill()
            host.wait()
            relay.stop()
    return {
        "p50_ms": round(statistics.median(followed), 1), "p99_ms": round(pct(followed, 0.99), 1),
        "alone_p50_ms": round(statistics.median(alone), 1), "alone_p99_ms": round(pct(alone, 0.99), 1),
        "status_ms": round(statistics.median(status), 1),
        "floor_ms": round(statistics.median(floors), 1),
        "left_ms": round(statistics.median(followed) - statistics.median(floors), 1),
        "alone_left_ms": round(statistics.median(alone) - statistics.median(floors), 1),
        "messages": args.messages,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=15)
    parser.add_argument("--timeout", type=float, default=600.0)
    args = parser.parse_args()
    try:
        r = run(args)
    except BenchError as exc:
        print(f"receipt_latency: {exc}", file=sys.stderr)
        return 1
    print(f"{'case':<34}{'p50 ms':>9}{'p99 ms':>9}", file=sys.stderr)
    print(f"{'with alice follower':<34}{r['p50_ms']:>9}{r['p99_ms']:>9}", file=sys.stderr)
    alone = f"{r['alone_p50_ms']:>9}{r['alone_p99_ms']:>9}"
    print(f"{'waiter alone (fetches receipts)':<34}{alone}", file=sys.stderr)
    print(f"{'baseline: one talk status process':<34}{r['status_ms']:>9}", file=sys.stderr)
    print(f"{'floor: deposit -> push -> fetch':<34}{r['floor_ms']:>9}", file=sys.stderr)
    print(f"left beyond the floor (p50): {r['left_ms']} ms with a follower, {r['alone_left_ms']} ms alone",
          file=sys.stderr)
    print(f"ratio p50 / status: {r['p50_ms'] / r['status_ms']:.1f}; target: ≤ 1000 ms", file=sys.stderr)
    print(json.dumps(r))
    return 0


if __name__ == "__main__":
    sys.exit(main())
