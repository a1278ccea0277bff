"""Delivery latency through the follower: send → line in the spool.

A real relay on loopback, two identities made contacts through the real CLI, and bob's
follower daemon started with `talk follow`. Alice's messages are sealed and deposited
in-process (so the figure is the pipeline, not a CLI start-up), one at a time; a watcher
thread tails bob's spool and notes when each id appears. Measured twice in the same run:

  push   the follower woken by the relay's WebSocket stream (the default)
  bare   the floor: the same three hops with none of talk's work (`bench/bare_push.py`: a
         Starlette relay that stores nothing and pushes talk's frame, a reader on talk's own
         WebSocket code that appends one line per frame), the same sealed messages sent by
         the same client; in --rounds blocks interleaved with `push`'s
  poll   the follower with push disabled, polling every --poll-interval seconds

Each message leaves at a random time: after a pause drawn uniformly from [0, interval), where
the interval is the poll interval for `poll` (so a message meets the poll cycle at a random
phase, as real mail does, not always just after a poll) and 50 ms for `push` (whose latency
has no phase to meet). A fixed seed makes runs comparable.

Each message is timed twice: from the moment its deposit returned (p50_ms, p99_ms; 0 when the
line was in the spool before: the relay writes the push before it answers the deposit, so the
follower may deliver it while the sender still reads the answer) and from the moment the send
began (send_p50_ms, send_p99_ms: the sender's own round trip included). `before_return` is the
share of messages in the spool before their send returned; `ratio` compares polling with push
from the send's start. `vs_floor` is push's p50 from the send's start over the bare pipeline's,
and `over_floor_ms` their difference: the part of a live message's way that is talk's own, the
rest being what this machine takes to wake three processes and carry a frame between them.

The watcher looks at the spool every 0.2 ms, and so keeps one core of the machine busy: the
figure is that of a machine at work. With --idle it sleeps until the kernel says the spool
folder was written (inotify, Linux), so between messages every process sleeps, as on an idle
machine; on a small virtual machine that reads several tenths of a millisecond more (each
process woken from a sleeping core runs its first steps slower), and the JSON line says which
watcher timed it ("watcher": "poll" or "inotify").

Run with the venv's interpreter:

    .venv/bin/python bench/latency.py [--messages 200] [--rounds 3] [--poll-messages 40] [--poll-interval 1]

It prints a table, then one JSON line:
    {"p50_ms":…,"p99_ms":…,"send_p50_ms":…,"send_p99_ms":…,"floor_p50_ms":…,"floor_p99_ms":…,
     "vs_floor":…,"over_floor_ms":…,"before_return":…,"poll_p50_ms":…,"poll_p99_ms":…,
     "ratio":…,"messages":N,"load":…,"watcher":"poll"}
Target: p50 ≤ 1.2 ms and p99 ≤ 3 ms on loopback (the pushed message opened without a fetch),
from the send's start as well as from its return.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import itertools
import json
import os
import random
import select
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

from bare_push import BarePipeline, line_id
from common import (
    Agent,
    BenchError,
    Deadline,
    Relay,
    base_env,
    befriend,
    find_talk,
    make_agent,
    pct,
    relay_env,
)

from follower.relay.client import RelayClient
from keys import keystore
from keys.contacts import ContactBook
from keys.envelope import channel_tag, new_message, seal
from keys.sodium import PublicKey

PUSH_PAUSE_S = 0.05


class FileChanges:
    """Wakes when a file in a folder is written: Linux's inotify, through libc."""

    IN_MODIFY, IN_CREATE, IN_CLOEXEC, IN_NONBLOCK = 0x2, 0x100, 0o2000000, 0o4000

    def __init__(self, fd: int) -> None:
        self.fd = fd

    @classmethod
    def watch(cls, folder: Path) -> FileChanges:
        libc = ctypes.CDLL(None, use_errno=True)
        try:
            fd = libc.inotify_init1(cls.IN_CLOEXEC | cls.IN_NONBLOCK)
        except AttributeError:
            fd = -1
        if fd < 0:
            raise BenchError("--idle needs inotify (Linux)")
        if libc.inotify_add_watch(fd, os.fsencode(folder), cls.IN_MODIFY | cls.IN_CREATE) < 0:
            os.close(fd)
            raise BenchError(f"cannot watch {folder}: {os.strerror(ctypes.get_errno())}")
        return cls(fd)

    def close(self) -> None:
        os.close(self.fd)

    def wait(self, timeout: float) -> None:
        """Until something in the folder was written, or `timeout`; drains the events."""
        if select.select([self.fd], [], [], timeout)[0]:
            with contextlib.suppress(BlockingIOError):
                while os.read(self.fd, 65536):
                    pass


class SpoolWatcher(threading.Thread):
    """Tails one NDJSON file and records when each message id first appears: looking every
    0.2 ms, or with `idle` only when the kernel says its folder was written (`FileChanges`)."""

    def __init__(self, path: Path, idle: bool = False) -> None:
        super().__init__(daemon=True)
        self.path = path
        self.changes = FileChanges.watch(path.parent) if idle else None
        self.seen: dict[str, float] = {}
        self.stopped = threading.Event()
        # The sender waits on this rather than polling too: a second thread waking every 0.2 ms
        # would take CPU from the relay and the follower on a small machine, and time the bench.
        self.arrived = threading.Condition()

    def run(self) -> None:
        offset, partial = 0, b""
        while not self.stopped.is_set():
            try:
                with self.path.open("rb") as f:
                    f.seek(offset)
                    data = f.read()
            except FileNotFoundError:
                data = b""
            now = time.perf_counter()
            if data:
                offset += len(data)
                *lines, partial = (partial + data).split(b"\n")
                with self.arrived:
                    for line in lines:
                        if line.strip():
                            self.seen.setdefault(json.loads(line)["id"], now)
                    self.arrived.notify_all()
            elif self.changes is not None:
                self.changes.wait(0.1)
            else:
                time.sleep(0.0002)
        if self.changes is not None:
            self.changes.close()


class Sample(NamedTuple):
    """One message's moments (perf_counter seconds): its send began, it returned, its line seen."""

    began: float
    returned: float
    seen: float

    @property
    def after_return_ms(self) -> float:
        return max(0.0, self.seen - self.returned) * 1000

    @property
    def from_start_ms(self) -> float:
        return (self.seen - self.began) * 1000


Probe = Callable[[int], tuple[str, bytes]]  # message i: the id its spool line will carry, its blob


def talk_probes(alice: Agent, bob: Agent) -> tuple[str, str, Probe]:
    """(bob's fingerprint, alice's tag to him, messages from alice to bob sealed in-process)."""
    me = keystore.unlock(keystore.load(alice.home / "alice"), None)
    bob_contact = ContactBook(alice.home / "alice").get("bob")
    peer = PublicKey(bob_contact.box_key)

    def probe(i: int) -> tuple[str, bytes]:
        inner = new_message(me.fingerprint, bob_contact.fingerprint, f"latency probe {i}")
        return inner.id, seal(inner, me.box_secret, peer)

    return bob_contact.fingerprint, channel_tag(me.box_secret, peer, bob_contact.fingerprint), probe


def measure(url: str, fp: str, tag: str, probe: Probe, spool: Path, count: int, deadline: Deadline,
            pause: float, idle: bool = False) -> list[Sample]:
    """Send `count` messages one at a time, each after a random pause in [0, `pause`); when each
    began, returned and was seen in `spool` (`idle`: as `SpoolWatcher` says)."""
    rng = random.Random(20261201)
    watcher = SpoolWatcher(spool, idle)
    watcher.start()
    samples = []
    try:
        with RelayClient(url) as client:
            for i in range(count):
                time.sleep(rng.uniform(0.0, pause))  # a random moment, not just after the last one
                line, blob = probe(i)
                began = time.perf_counter()
                client.deposit(fp, tag, blob)
                returned = time.perf_counter()
                with watcher.arrived:
                    while line not in watcher.seen:
                        deadline.timeout()
                        watcher.arrived.wait(0.1)
                samples.append(Sample(began, returned, watcher.seen[line]))
    finally:
        watcher.stopped.set()
    return samples


def wait_push_connected(bob: Agent, deadline: Deadline) -> None:
    while True:
        deadline.timeout()
        follower = json.loads(bob.ok(deadline, "status", "--json"))["follower"]
        if follower.get("push") == "connected":
            return
        time.sleep(0.05)


def run(args: argparse.Namespace) -> dict[str, float | str]:
    deadline = Deadline(args.timeout)
    talk = find_talk()
    with tempfile.TemporaryDirectory(prefix="talk-bench-") as tmp:
        root = Path(tmp)
        relay = Relay(talk, root / "relay" / "relay.db", root / "relay.log", relay_env())
        relay.start(deadline)
        (root / "bare").mkdir()
        bare: BarePipeline | None = None
        try:
            alice = make_agent(talk, root, relay, "alice", None, deadline)
            bob = make_agent(talk, root, relay, "bob", None, deadline)
            befriend(alice, bob, deadline)
            # Hundreds of messages a minute on purpose: above bob's default receive limit.
            bob.ok(deadline, "policy", "alice", "--receive-rate", "100000", "--yes")
            bob.ok(deadline, "follow", "--peer", "alice")
            wait_push_connected(bob, deadline)
            fp, tag, probe = talk_probes(alice, bob)
            spool = bob.home / "bob" / "spool" / "inbox.ndjson"
            bare = BarePipeline(fp, root / "bare" / "lines.ndjson", root / "bare.log")
            bare.start(deadline)
            bare_probe = bare_probes(probe)
            wait_bare_connected(bare, fp, tag, bare_probe, deadline)
            push: list[Sample] = []
            floor: list[Sample] = []
            rounds = max(1, min(args.rounds, args.messages))
            for r in range(rounds):  # interleaved: a slower minute of the machine falls on both
                count = args.messages // rounds + (r < args.messages % rounds)
                push += measure(relay.url, fp, tag, probe, spool, count, deadline, PUSH_PAUSE_S, args.idle)
                floor += measure(bare.url, fp, tag, bare_probe, bare.out, count, deadline, PUSH_PAUSE_S,
                                 args.idle)
            bob.ok(deadline, "stop")
            bob.ok(deadline, "follow", "--peer", "alice", "--no-push",
                   "--interval", str(args.poll_interval))
            poll = measure(relay.url, fp, tag, probe, spool, args.poll_messages, deadline, args.poll_interval)
            bob.ok(deadline, "stop")
        finally:
            if bare is not None:
                bare.stop()
            bob_stop(root)
            relay.stop()
    return {**summarize(push, poll, floor), "watcher": "inotify" if args.idle else "poll"}


def bare_probes(probe: Probe) -> Probe:
    """The same sealed messages, waited for under the id the bare follower writes."""
    def bare(i: int) -> tuple[str, bytes]:
        blob = probe(i)[1]
        return line_id(blob), blob
    return bare


def wait_bare_connected(bare: BarePipeline, fp: str, tag: str, probe: Probe, deadline: Deadline) -> None:
    """Until a message deposited on the bare relay reaches the bare follower's file: a stream not
    connected yet drops it, so one is sent again every half second."""
    with RelayClient(bare.url) as client:
        for i in itertools.count(1_000_000):
            deadline.timeout()
            line, blob = probe(i)
            client.deposit(fp, tag, blob)
            stop = time.monotonic() + 0.5
            while time.monotonic() < stop:
                with contextlib.suppress(FileNotFoundError):
                    if line in bare.out.read_text():
                        return
                time.sleep(0.01)


def bob_stop(root: Path) -> None:
    """Best effort: never leave a follower behind, whatever failed."""
    import subprocess

    talk = find_talk()
    subprocess.run([talk, "stop", "-u", "bob"], env={**base_env(None), "TALK_HOME": str(root / "home-bob")},
                   capture_output=True, timeout=30, check=False)


def summarize(push: list[Sample], poll: list[Sample], floor: list[Sample]) -> dict[str, float]:
    after = [s.after_return_ms for s in push]
    whole = [s.from_start_ms for s in push]
    poll_whole = [s.from_start_ms for s in poll]
    floor_whole = [s.from_start_ms for s in floor]
    send_p50, floor_p50 = statistics.median(whole), statistics.median(floor_whole)
    return {
        "p50_ms": round(statistics.median(after), 2), "p99_ms": round(pct(after, 0.99), 2),
        "send_p50_ms": round(send_p50, 2), "send_p99_ms": round(pct(whole, 0.99), 2),
        "floor_p50_ms": round(floor_p50, 2), "floor_p99_ms": round(pct(floor_whole, 0.99), 2),
        "vs_floor": round(send_p50 / floor_p50, 2), "over_floor_ms": round(send_p50 - floor_p50, 2),
        "before_return": round(sum(s.seen <= s.returned for s in push) / len(push), 2),
        "poll_p50_ms": round(statistics.median(poll_whole), 2),
        "poll_p99_ms": round(pct(poll_whole, 0.99), 2),
        "ratio": round(statistics.median(poll_whole) / send_p50, 1),
        "messages": len(push), "load": round(os.getloadavg()[0], 2),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=200)
    parser.add_argument("--poll-messages", type=int, default=40)
    parser.add_argument("--poll-interval", type=float, default=1.0)
    parser.add_argument("--rounds", type=int, default=3,
                        help="talk's pushed messages and the bare pipeline's, in as many interleaved blocks")
    parser.add_argument("--timeout", type=float, default=600.0)
    parser.add_argument("--idle", action="store_true",
                        help="time pushed mail with every process asleep between messages (inotify)")
    args = parser.parse_args()
    try:
        result = run(args)
    except BenchError as exc:
        print(f"latency: {exc}", file=sys.stderr)
        return 1
    print(f"{'from':<24}{'p50 ms':>10}{'p99 ms':>10}", file=sys.stderr)
    print(f"{'push, send returned':<24}{result['p50_ms']:>10}{result['p99_ms']:>10}", file=sys.stderr)
    print(f"{'push, send began':<24}{result['send_p50_ms']:>10}{result['send_p99_ms']:>10}", file=sys.stderr)
    print(f"{'bare, send began':<24}{result['floor_p50_ms']:>10}{result['floor_p99_ms']:>10}",
          file=sys.stderr)
    print(f"{'poll, send began':<24}{result['poll_p50_ms']:>10}{result['poll_p99_ms']:>10}", file=sys.stderr)
    print(f"{result['before_return']:.0%} of pushed messages were in the spool before their send "
          f"returned; push is {result['ratio']}x faster than polling every {args.poll_interval} s "
          "(p50, from the send's start)", file=sys.stderr)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
