"""Wall-clock time of `talk show NAME` on a long conversation, against baselines in the same run.

Setup: a relay (`talk relay`, rate limits off) on a free 127.0.0.1 port with a temporary SQLite
file; alice and bob, each in a temporary TALK_HOME, contacts by invite -> join -> receive, each
with a follower. Then both send --messages messages (default 500 each way, 1,000 in all) at
once, through the library path `talk send` takes (`Account.send`, in one process per sender so
the setup does not take minutes); the followers take them into the spools and send the receipts
that move the outboxes' states. The conversation on disk is therefore exactly what talk writes.

What it measures, on bob's side, each as one child process (interpreter start, imports, reading
and printing all count), in a rotating order round by round so host noise hits them alike:

  show         `talk show alice`: plain text (stdout is a pipe), the newest 50 of 1,000 lines
  show_json    `talk show alice --json`
  show_all     `talk show alice --limit 0`: every one of the 1,000 lines printed
  python_read  `python -c` reading and parsing every line of the same files (spool, outbox,
               task ledger): the floor for a command that reads the conversation
  log          `talk log`: the spool for a human, through typer (no fast lane)

A table (median, p90, min in ms) and the ratios (median of round-by-round ratios) go to
stderr, with the load average; stdout ends with one JSON line. Exit 1 if the median of `show`
is over --budget-ms (300).

    .venv/bin/python bench/show_speed.py [--runs 20] [--warmups 2] [--messages 500]
                                         [--budget-ms 300] [--timeout 900]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from common import (
    Agent,
    BenchError,
    Deadline,
    Relay,
    base_env,
    befriend,
    begin,
    make_agent,
    pct,
    relay_env,
    timed,
)

SHOWS = ("show", "show_json", "show_all")  # each must answer within the budget
NAMES = ("show", "show_json", "show_all", "python_read", "log")
SHOWN = 50  # `talk show`'s default --limit
SETTLE_S = 300.0  # for the followers to take every message and every receipt

# Sends argv[2] messages to contact argv[1] the way `talk send` does, in one process.
SENDER = """
import sys
from talk.context import open_account
account = open_account(None, None, None)
for i in range(int(sys.argv[2])):
    account.send(sys.argv[1], f"message {i} from {account.name}: " + "words " * 8)
"""

# The baseline: read and parse every line `talk show` reads, and nothing else.
READER = """
import json, sys
from pathlib import Path
folder = Path(sys.argv[1])
files = [*(folder / "spool").rglob("*.ndjson*"), *(folder / "held").rglob("*.json"), *(folder / n for n in
         ("outbox.ndjson", "outbox-history.ndjson", "tasks.ndjson"))]
count = sum(1 for f in files if f.is_file() for line in f.read_bytes().splitlines() if json.loads(line))
print(count)
"""


def summary(samples: list[float]) -> dict[str, float]:
    """Median, p90 and min of one measurement's samples (ms)."""
    return {"median": statistics.median(samples), "p90": pct(samples, 0.9), "min": min(samples)}


def ratio(this: list[float], base: list[float]) -> float:
    """The median of the round-by-round ratios this/base: what says "slower" on a busy machine."""
    return statistics.median(a / b for a, b in zip(this, base, strict=True))


def over_budget(samples: dict[str, list[float]], budget_ms: float) -> list[str]:
    """The measurements of `talk show` whose median is over the budget."""
    return [n for n in SHOWS if statistics.median(samples[n]) > budget_ms]


def report(samples: dict[str, list[float]], runs: int) -> str:
    rows = [f"{'command':<26} {'median':>8} {'p90':>8} {'min':>8}   (ms, {runs} runs)"]
    labels = {"show": "talk show alice", "show_json": "talk show alice --json",
              "show_all": "talk show alice --limit 0",
              "python_read": "python -c (read the files)", "log": "talk log"}
    for name in NAMES:
        s = summary(samples[name])
        rows.append(f"{labels[name]:<26} {s['median']:8.1f} {s['p90']:8.1f} {s['min']:8.1f}")
    return "\n".join(rows)


@dataclass
class Bench:
    bob: Agent
    messages: int  # each way
    deadline: Deadline

    def run(self, name: str) -> float:
        cmd = {"show": self.bob.cmd("show", "alice"), "show_json": self.bob.cmd("show", "alice", "--json"),
               "show_all": self.bob.cmd("show", "alice", "--limit", "0"),
               "python_read": [sys.executable, "-c", READER, str(self.bob.home / "bob")],
               "log": self.bob.cmd("log")}[name]
        ms, out = timed(cmd, self.bob.env(), self.deadline, name)
        if not did_its_work(name, out, self.messages):
            raise BenchError(f"{name} did not answer what it should: {out[:300]!r}")
        return ms

    def round(self, index: int) -> dict[str, float]:
        order = NAMES[index % len(NAMES):] + NAMES[:index % len(NAMES)]
        return {name: self.run(name) for name in order}


def did_its_work(name: str, out: str, messages: int) -> bool:
    """A wrong or empty answer would make a fast one meaningless."""
    if name == "show":
        return len(out.splitlines()) == SHOWN
    if name == "show_json":
        return len(json.loads(out)) == SHOWN
    if name == "show_all":
        return len(out.splitlines()) >= 2 * messages
    if name == "python_read":
        return int(out) >= 2 * messages  # every message, and the outbox's events besides
    return out.count("message ") >= messages  # log: the received ones


def converse(alice: Agent, bob: Agent, messages: int, deadline: Deadline) -> None:
    """Both send at once, then wait until every message is spooled and every receipt is back."""
    senders = [subprocess.Popen([sys.executable, "-c", SENDER, to, str(messages)], env=agent.env(),
                                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
               for agent, to in ((alice, "bob"), (bob, "alice"))]
    for proc in senders:
        _, err = proc.communicate(timeout=deadline.timeout(SETTLE_S))
        if proc.returncode != 0:
            raise BenchError(f"sending failed: {err.decode(errors='replace').strip()[-2000:]}")
    end = time.monotonic() + deadline.timeout(SETTLE_S)
    while time.monotonic() < end:
        rows = json.loads(bob.ok(deadline, "show", "alice", "--json", "--limit", "0"))
        # Not the note the invite left (bob's `talk receive` took it): the messages sent here.
        spooled = [r for r in rows if r["kind"] == "chat"
                   and (r["dir"] == "in" or r["state"] in ("spooled", "delivered"))]
        if len(spooled) == 2 * messages:
            return
        time.sleep(0.5)
    raise BenchError(f"the followers did not settle {2 * messages} messages in {SETTLE_S:.0f} s")


def setup(talk: str, root: Path, relay: Relay, messages: int, deadline: Deadline) -> Bench:
    alice = make_agent(talk, root, relay, "alice", None, deadline)
    bob = make_agent(talk, root, relay, "bob", None, deadline)
    befriend(alice, bob, deadline)
    for agent, peer in ((alice, "bob"), (bob, "alice")):
        agent.ok(deadline, "policy", peer, "--send-rate", "100000", "--receive-rate", "100000", "--yes")
        agent.ok(deadline, "follow", "--peer", peer)
    try:
        converse(alice, bob, messages, deadline)
    finally:
        for agent in (alice, bob):
            agent.ok(deadline, "stop")  # the measured commands read files no follower is changing
    return Bench(bob, messages, deadline)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--runs", type=int, default=20, help="timed rounds (20)")
    parser.add_argument("--warmups", type=int, default=2, help="untimed rounds first (2)")
    parser.add_argument("--messages", type=int, default=500, help="messages each way (500)")
    parser.add_argument("--budget-ms", type=float, default=300.0, help="most a median of show may take")
    parser.add_argument("--timeout", type=float, default=900.0, help="budget for the whole run, s (900)")
    return parser.parse_args(argv)


def measure(bench: Bench, warmups: int, runs: int) -> dict[str, list[float]]:
    samples: dict[str, list[float]] = {name: [] for name in NAMES}
    for i in range(warmups + runs):
        for name, ms in bench.round(i).items():
            if i >= warmups:
                samples[name].append(ms)
    return samples


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    deadline, talk, root = begin(args.timeout)
    # Bytecode cached, as after an install; the relay's rate limits off (see common.relay_env).
    env = {**base_env(root / "pycache"),
           **{k: v for k, v in relay_env().items() if k.startswith("TALK_RELAY_")}}
    relay = Relay(talk, root / "relay" / "relay.db", root / "relay.log", env)
    try:
        relay.start(deadline)
        bench = setup(talk, root, relay, args.messages, deadline)
        samples = measure(bench, max(0, args.warmups), max(1, args.runs))
    except BenchError as exc:
        print(f"show_speed: error: {exc}", file=sys.stderr)
        return 1
    finally:
        relay.stop()
        shutil.rmtree(root, ignore_errors=True)
    print(report(samples, len(samples["show"])), file=sys.stderr)
    ratios = {f"{n}/{base}": round(ratio(samples[n], samples[base]), 3)
              for n in SHOWS for base in ("python_read", "log")}
    over = over_budget(samples, args.budget_ms)
    load = os.getloadavg()[0]
    print("ratios (median of round-by-round ratios): " + ", ".join(f"{k} {v:.3f}" for k, v in ratios.items())
          + f"\nload average at the end: {load:.2f}; budget {args.budget_ms:.0f} ms: "
          + (f"OVER for {', '.join(over)}" if over else "met"), file=sys.stderr)
    medians = {f"{n}_ms": round(statistics.median(samples[n]), 1) for n in NAMES}
    print(json.dumps({**medians, "ratio": ratios, "runs": len(samples["show"]), "messages": 2 * args.messages,
                      "load": load}))
    return 1 if over else 0


if __name__ == "__main__":
    sys.exit(main())
