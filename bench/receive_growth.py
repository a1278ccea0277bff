"""Does `talk receive` slow down as the identity's store of taken ids grows?

Two receivers, alike but for their channel store (channels.db): `empty` holds no ids at the
start of each round (its ids are deleted between rounds), `full` holds 50,000 ids (and the
100 more of each round). Each round alice deposits 100 messages to each through the
project's own send path (sealed, numbered, deposited: the same work `talk send` does,
without 200 process starts), then `talk receive` runs for each as a real child process and
is timed end to end (start-up, unlock, fetch, open, judge, record, print, ack). The two
receives alternate which goes first, so host noise hits them alike.

    .venv/bin/python bench/receive_growth.py [--runs 7] [--ids 50000] [--messages 100]

A table goes to stderr; stdout ends with one JSON line:

    {"empty_ms": ..., "full_ms": ..., "ratio": ..., "ids": N, "messages": M, "runs": R}

Target: ratio <= 1.2. Only loopback traffic; everything is removed afterwards.
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

from follower.receive.channeldb import ChannelDB
from follower.relay.client import RelayClient
from follower.send.outbound import send
from keys import keystore
from keys.contacts import ContactBook


def folder(agent: Agent) -> Path:
    return agent.home / agent.name


def fill(agent: Agent, count: int) -> None:
    """`count` ids taken within the last days, as a long-lived identity would hold."""
    store = ChannelDB(folder(agent))
    now = time.time()
    rows = [(secrets.token_hex(16), now - i * 10.0) for i in range(count)]
    store.db.execute("BEGIN")
    store.db.executemany("INSERT OR IGNORE INTO seen VALUES (?, ?)", rows)
    store.db.execute("COMMIT")
    store.close()


def forget(agent: Agent) -> None:
    store = ChannelDB(folder(agent))
    store.db.execute("DELETE FROM seen")
    store.close()


def deposit(alice: Agent, client: RelayClient, to: str, count: int) -> None:
    me = keystore.unlock(keystore.load(folder(alice)), None)
    contact = ContactBook(folder(alice)).get(to)
    for i in range(count):
        send(me, client, contact, f"growth probe {i}", folder=folder(alice))


def receive(agent: Agent, deadline: Deadline, expected: int) -> float:
    ms, out = timed(agent.cmd("receive"), agent.env(), deadline, f"{agent.name}: talk receive")
    got = len(ndjson(out))
    if got != expected:
        raise BenchError(f"{agent.name}: talk receive printed {got} messages, expected {expected}")
    return ms


def count_ids(agent: Agent) -> int:
    store = ChannelDB(folder(agent))
    n = int(store.db.execute("SELECT COUNT(*) FROM seen").fetchone()[0])
    store.close()
    return n


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--runs", type=int, default=7, help="timed rounds (7)")
    parser.add_argument("--ids", type=int, default=50_000, help="ids in the full store (50000)")
    parser.add_argument("--messages", type=int, default=100, help="messages per receive (100)")
    parser.add_argument("--timeout", type=float, default=900.0, help="budget, seconds (900)")
    return parser.parse_args(argv)



def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    deadline, talk, root = begin(args.timeout)
    relay = Relay(talk, root / "relay" / "relay.db", root / "relay.log", relay_env())
    samples: dict[str, list[float]] = {"empty": [], "full": []}
    try:
        relay.start(deadline)
        alice = make_agent(talk, root, relay, "alice", None, deadline)
        empty = make_agent(talk, root, relay, "empty", None, deadline)
        full = make_agent(talk, root, relay, "full", None, deadline)
        befriend(alice, empty, deadline)
        befriend(alice, full, deadline)
        fill(full, args.ids)
        with RelayClient(relay.url) as client:
            for i in range(args.runs + 1):  # the first round warms caches and is not counted
                forget(empty)
                pair = [(empty, "empty"), (full, "full")]
                for agent, _ in pair:
                    deposit(alice, client, agent.name, args.messages)
                for agent, label in pair if i % 2 else pair[::-1]:
                    ms = receive(agent, deadline, args.messages)
                    if i:
                        samples[label].append(ms)
        held = count_ids(full)
    except BenchError as exc:
        print(f"receive_growth: error: {exc}", file=sys.stderr)
        return 1
    finally:
        relay.stop()
        shutil.rmtree(root, ignore_errors=True)
    medians = {k: statistics.median(v) for k, v in samples.items()}
    for label, values in samples.items():
        print(f"talk receive, {args.messages} messages, {label:<5} store: median {medians[label]:7.1f} ms, "
              f"min {min(values):7.1f} ms ({args.runs} runs)", file=sys.stderr)
    print(f"full store held {held} ids at the end; load {os.getloadavg()[0]:.2f}", file=sys.stderr)
    print(json.dumps({"empty_ms": round(medians["empty"], 1), "full_ms": round(medians["full"], 1),
                      "ratio": round(medians["full"] / medians["empty"], 3), "ids": args.ids,
                      "messages": args.messages, "runs": args.runs}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
