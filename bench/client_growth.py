"""Do `talk send` and `talk receive` slow down as an identity ages?

Three pairs of identities, alike but for how many messages they have behind them: 0, 10,000
and 100,000 (--levels). Before timing, each sender and receiver of a pair is aged to what that
many messages leave on disk, written by the stores' own code:

  sender    outbox-history.ndjson with one settled (delivered) entry per message
            (`Entry.snapshot`, `append_records`: what outbox compaction writes), and its count
            of messages to the receiver at N (`seqcounter.move_past`)
  receiver  channels.db holding the N ids, all within the days the store keeps ids (the
            worst case: none has aged out yet), and the sender's numbering at N

Then each round, for each pair (the order rotates, so host noise hits all alike), the sender
runs `talk send` and the receiver `talk receive` with exactly that one message waiting, each a
real child process timed end to end (start-up, unlock, seal, count, outbox, deposit; fetch,
open, judge, record, print, ack, receipt). Medians per level; each level's ratio to the first
is the median of the round-by-round ratios (the pairs of one round ran side by side, so host
noise that hits a round hits both).

    .venv/bin/python bench/client_growth.py [--runs 15] [--levels 0,10000,100000]

A table goes to stderr; stdout ends with one JSON line:

    {"send_ms": {"0": ..., ...}, "receive_ms": {...}, "send_ratio": {"100000": ...},
     "receive_ratio": {...}, "runs": R}

Target: every ratio <= 1.2. Only loopback traffic; everything is removed afterwards.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import shutil
import statistics
import sys
import time
from pathlib import Path

from common import (
    Agent,
    BenchError,
    Deadline,
    Relay,
    befriend,
    begin,
    make_agent,
    ndjson,
    relay_env,
    timed,
)

from durable.ndjson import append_records
from follower.receive.channeldb import ChannelDB
from follower.send.outbox import Entry, Outbox
from follower.send.seqcounter import move_past

CHUNK = 10_000  # history lines per append


def folder(agent: Agent) -> Path:
    return agent.home / agent.name


def fingerprint(agent: Agent) -> str:
    return str(json.loads(agent.ok(Deadline(30), "id", "--json"))["fingerprint"])


def age_sender(sender: Agent, to_fp: str, count: int) -> None:
    """`count` delivered messages to `to_fp` in the outbox history, and the count at `count`."""
    box = Outbox(folder(sender))
    now = time.time()
    for start in range(0, count, CHUNK):
        entries = []
        for i in range(start, min(count, start + CHUNK)):
            ts = now - (count - i) * 5.0
            entry = Entry(secrets.token_hex(16), to_fp, "peer", "chat", f"message {i} " + "x" * 60,
                          ts, state="delivered", updated=ts + 2, last_attempt=ts, tag=secrets.token_hex(16))
            entries.append(entry.snapshot())
        append_records(box.history, entries)
    move_past(folder(sender), to_fp, count)


def age_receiver(receiver: Agent, from_fp: str, count: int) -> None:
    """`count` ids taken from `from_fp` over the last days, and its numbering at `count`."""
    store = ChannelDB(folder(receiver))
    now = time.time()
    rows = [(secrets.token_hex(16), now - (count - i) * 5.0) for i in range(count)]
    store.db.execute("BEGIN")
    store.db.executemany("INSERT OR IGNORE INTO seen VALUES (?, ?)", rows)
    store.db.execute("INSERT OR REPLACE INTO channel VALUES (?, ?, '[]')", (from_fp, count))
    store.db.execute("COMMIT")
    store.close()


class Pair:
    def __init__(self, level: int, sender: Agent, receiver: Agent) -> None:
        self.level, self.sender, self.receiver = level, sender, receiver
        self.send_ms: list[float] = []
        self.receive_ms: list[float] = []
        self.counter = 0

    def round(self, deadline: Deadline, keep: bool) -> None:
        self.counter += 1
        text = f"probe {self.counter}"
        ms, _ = timed(self.sender.cmd("send", self.receiver.name, text), self.sender.env(), deadline,
                      f"{self.sender.name}: talk send")
        got_ms, out = timed(self.receiver.cmd("receive"), self.receiver.env(), deadline,
                            f"{self.receiver.name}: talk receive")
        got = ndjson(out)
        if [m.get("text") for m in got] != [text] or any("gap" in m for m in got):
            raise BenchError(f"{self.receiver.name}: expected {text!r} in order, got {got}")
        if keep:
            self.send_ms.append(ms)
            self.receive_ms.append(got_ms)


def make_pair(talk: str, root: Path, relay: Relay, level: int, deadline: Deadline) -> Pair:
    sender = make_agent(talk, root, relay, f"s{level}", None, deadline)
    receiver = make_agent(talk, root, relay, f"r{level}", None, deadline)
    befriend(sender, receiver, deadline)
    age_sender(sender, fingerprint(receiver), level)
    age_receiver(receiver, fingerprint(sender), level)
    return Pair(level, sender, receiver)


def levels(text: str) -> list[int]:
    values = [int(v) for v in text.split(",") if v.strip()]
    if not values or any(v < 0 for v in values):
        raise argparse.ArgumentTypeError("give comma-separated message counts, the first the baseline")
    return values


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--runs", type=int, default=15, help="timed rounds (15)")
    parser.add_argument("--levels", type=levels, default=[0, 10_000, 100_000],
                        help="lifetime messages per pair, the first the baseline (0,10000,100000)")
    parser.add_argument("--timeout", type=float, default=1800.0, help="budget, seconds (1800)")
    return parser.parse_args(argv)



def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    deadline, talk, root = begin(args.timeout)
    relay = Relay(talk, root / "relay" / "relay.db", root / "relay.log", relay_env())
    try:
        relay.start(deadline)
        pairs = []
        for level in args.levels:
            print(f"aging a pair to {level} messages...", file=sys.stderr)
            pairs.append(make_pair(talk, root, relay, level, deadline))
        for i in range(args.runs + 1):  # the first round warms caches and is not counted
            shift = i % len(pairs)
            for pair in pairs[shift:] + pairs[:shift]:
                pair.round(deadline, keep=i > 0)
        sizes = {p.level: (folder(p.sender) / "outbox-history.ndjson").stat().st_size
                 if p.level else 0 for p in pairs}
    except BenchError as exc:
        print(f"client_growth: error: {exc}", file=sys.stderr)
        return 1
    finally:
        relay.stop()
        shutil.rmtree(root, ignore_errors=True)
    base = pairs[0]
    out: dict[str, object] = {"send_ms": {}, "receive_ms": {}, "send_ratio": {}, "receive_ratio": {}}
    for what in ("send", "receive"):
        first: list[float] = getattr(base, f"{what}_ms")
        for p in pairs:
            times: list[float] = getattr(p, f"{what}_ms")
            median = statistics.median(times)
            out[f"{what}_ms"][str(p.level)] = round(median, 1)  # type: ignore[index]
            ratio = statistics.median(a / b for a, b in zip(times, first, strict=True))
            if p is not base:
                out[f"{what}_ratio"][str(p.level)] = round(ratio, 3)  # type: ignore[index]
            print(f"talk {what:<7} after {p.level:>7} messages: median {median:7.1f} ms, "
                  f"min {min(times):7.1f} ms, ratio {ratio:.3f}", file=sys.stderr)
    print(f"outbox history sizes (bytes): {sizes}; load {os.getloadavg()[0]:.2f}", file=sys.stderr)
    print(json.dumps({**out, "runs": args.runs}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
