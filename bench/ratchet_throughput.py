"""Forward-secret mail at full speed? Library send and receive rates, Olm sessions vs today's envelope.

Two pairs of identities on one real relay on loopback, alike but for forward secrecy:

  ratchet   made as `talk init` makes them: ratchet keys published, mail rides Olm sessions
            (after a warm-up exchange both ways, so alice's messages are session messages, no
            longer pre-key messages carrying her card)
  envelope  made and run with TALK_RATCHET=off: today's sealed envelope (the baseline)

Each round:

  send      one child process unlocks both alices and sends --messages messages from each to
            her bob through the library's send path (`Account.send`: send rate, outbox,
            numbering, sealing, the session step saved, the deposit), alternating pair by pair
            message by message (which goes first alternating too). Each send is timed alone,
            but not the first of each (it loads the send path) nor the start-up. The disk's
            sync times wander by tens of percent within a second; taken in turn, they fall on
            both pairs alike (rounds of 300 sends per pair, one pair after the other, spread
            from 0.76 to 1.01 in their ratio, the same code)
  receive   for each pair in turn (the first alternating, so host noise hits both alike), a
            child process builds bob's follower and drains them all (`Follower.drain`: fetch
            pages, open, judge, spool, sync, commit, ack); the drain alone is timed. Then,
            untimed, its receipts go out and alice takes them, as her follower would.

Run with the venv's interpreter:

    .venv/bin/python bench/ratchet_throughput.py [--messages 300] [--runs 5] [--profile DIR]

A table goes to stderr; stdout ends with one JSON line of medians (messages per second):

    {"send_per_s": ..., "receive_per_s": ..., "envelope_send_per_s": ...,
     "envelope_receive_per_s": ..., "send_ratio": ..., "send_ratio_quartiles": [Q1, Q3],
     "receive_ratio": ..., "receive_ratio_quartiles": [Q1, Q3], "messages": N, "runs": R, "load": L}

Target: both ratios (ratchet / envelope, the median of the round-by-round ratios) >= 0.9. The
quartiles say how far single rounds spread; with them wide, run more rounds (--runs).
With --profile DIR, the last round writes cProfile dumps there (each pair's sends, each drain). Only loopback
traffic; everything is removed afterwards.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shutil
import statistics
import sys
from dataclasses import dataclass, field
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
    run_checked,
)

HEADER = """
import cProfile, json, sys, time
"""

TIMED = HEADER + """
def timed(run, profile):
    profiler = cProfile.Profile() if profile else None
    start = time.perf_counter()
    if profiler:
        profiler.enable()
    run()
    seconds = time.perf_counter() - start
    if profiler:
        profiler.disable()
        profiler.dump_stats(profile)
    return seconds
"""

SEND = HEADER + """
import os
from talk.context import open_account
homes, count, profiles = sys.argv[1:3], int(sys.argv[3]), sys.argv[4:6]
off = {"TALK_RATCHET": "off"}  # the envelope pair runs without forward secrecy, as it was made

def opened(home, env):
    os.environ.update({"TALK_HOME": home, **env})
    account = open_account(None, None, None)  # the identity's folder is fixed from here on
    account.identity()
    return account

accounts = [opened(homes[0], {}), opened(homes[1], off)]
seconds, queued = [0.0, 0.0], [0, 0]
profilers = [cProfile.Profile() if p else None for p in profiles]

def send(j, i):
    if j:
        os.environ.update(off)
    else:
        os.environ.pop("TALK_RATCHET", None)
    profiler = profilers[j] if i else None
    start = time.perf_counter()
    if profiler:
        profiler.enable()
    stored = accounts[j].send("bob", f"throughput probe {i}").state == "stored"
    if profiler:
        profiler.disable()
    if i:  # the first of each is not timed: it loads the send path (whichever pair went first)
        seconds[j] += time.perf_counter() - start
    queued[j] += not stored

for i in range(count):
    for j in ((0, 1) if i % 2 else (1, 0)):
        send(j, i)
for profiler, path in zip(profilers, profiles):
    if profiler:
        profiler.dump_stats(path)
print(json.dumps({"seconds": seconds, "queued": queued}))
"""

DRAIN = TIMED + """
from follower.daemon.daemon import Follower
from talk.context import open_account
follower = Follower(open_account(None, None, None))
follower.config.every = True
seconds = timed(follower.drain, sys.argv[1])
follower.upkeep.finish()  # the receipts still queued go now, as when a follower stops
print(json.dumps({"seconds": seconds, "delivered": follower.status.delivered}))
"""

HIGH_RATE = "100000"  # messages a minute: far above what the bench sends, so no policy holds it


@dataclass
class Pair:
    label: str
    alice: Agent
    bob: Agent
    rates: dict[str, list[float]] = field(default_factory=lambda: {"send": [], "receive": []})

    def child(self, agent: Agent, script: str, args: list[str], deadline: Deadline) -> dict[str, float]:
        out = run_checked([sys.executable, "-c", script, *args], agent.env(), deadline,
                          f"{self.label}: {agent.name}")
        result: dict[str, float] = json.loads(out.splitlines()[-1])
        return result

    def dump(self, profile: Path | None, step: str) -> str:
        return str(profile / f"{self.label}-{step}.prof") if profile else ""

    def receive(self, count: int, queued: int, deadline: Deadline, profile: Path | None) -> float:
        """Bob's drain of the round's `count` messages, timed; then the receipts, untimed."""
        drained = self.child(self.bob, DRAIN, [self.dump(profile, "receive")], deadline)
        if drained["delivered"] != count:
            # A deposit that timed out under load leaves the message queued in alice's outbox
            # (it goes later, by her follower): not lost, but not on the relay for this drain.
            raise BenchError(f"{self.label}: bob's follower delivered {drained['delivered']} of {count}"
                             f" ({queued} left queued in alice's outbox by a failed deposit)")
        # Untimed, as alice's follower would meanwhile: her receipts settle what she sent (the
        # sealed copies a forward-secret send keeps in flight until then go).
        self.alice.ok(deadline, "receive")
        return count / drained["seconds"]


def send_both(pairs: list[Pair], count: int, deadline: Deadline,
              profile: Path | None) -> tuple[list[float], list[int]]:
    """Each pair's send rate (messages a second), and how many stayed queued, from one child
    process sending for both, message by message in turn (see the module's docstring)."""
    first = pairs[0].alice
    out = run_checked([sys.executable, "-c", SEND, *(str(p.alice.home) for p in pairs), str(count),
                       *(p.dump(profile, "send") for p in pairs)], first.env(), deadline, "both alices")
    sent = json.loads(out.splitlines()[-1])
    return [(count - 1) / seconds for seconds in sent["seconds"]], [int(n) for n in sent["queued"]]


def make_pair(label: str, talk: str, root: Path, relay: Relay, env: dict[str, str],
              deadline: Deadline) -> Pair:
    folder = root / label
    folder.mkdir()
    with_env = dataclasses.replace(relay, base_env={**relay.base_env, **env})  # what its agents run with
    alice = make_agent(talk, folder, with_env, "alice", None, deadline)
    bob = make_agent(talk, folder, with_env, "bob", None, deadline)
    befriend(alice, bob, deadline)
    alice.ok(deadline, "policy", "bob", "--send-rate", HIGH_RATE, "--yes")
    bob.ok(deadline, "policy", "alice", "--receive-rate", HIGH_RATE, "--yes")
    # Warm-up both ways: the session is established, and alice's mail rides it as it would in
    # a conversation (before bob's first answer every message of hers is a pre-key message).
    alice.ok(deadline, "send", "bob", "warm-up")
    bob.ok(deadline, "send", "alice", "warm-up answer")
    for agent in (bob, alice):
        if len(ndjson(agent.ok(deadline, "receive"))) != 1:
            raise BenchError(f"{label}: {agent.name} did not get the warm-up message")
    return Pair(label, alice, bob)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--messages", type=int, default=300, help="messages per pair and round (300)")
    parser.add_argument("--runs", type=int, default=5, help="timed rounds (5)")
    parser.add_argument("--timeout", type=float, default=1200.0, help="budget, seconds (1200)")
    parser.add_argument("--profile", type=Path, help="write cProfile dumps of the last round here")
    return parser.parse_args(argv)


def ratios(this: list[float], base: list[float]) -> tuple[float, list[float]]:
    """The median of the round-by-round ratios, and their first and third quartiles: how far
    the rounds spread (the disk's sync times wander from one round to the next)."""
    each = [a / b for a, b in zip(this, base, strict=True)]
    quartiles = statistics.quantiles(each, n=4) if len(each) > 1 else [each[0]] * 3
    return round(statistics.median(each), 3), [round(quartiles[0], 3), round(quartiles[2], 3)]


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    deadline, talk, root = begin(args.timeout)
    env = relay_env()
    relay = Relay(talk, root / "relay" / "relay.db", root / "relay.log", env)
    try:
        relay.start(deadline)
        pairs = [make_pair("ratchet", talk, root, relay, {}, deadline),
                 make_pair("envelope", talk, root, relay, {"TALK_RATCHET": "off"}, deadline)]
        if args.profile:
            args.profile.mkdir(parents=True, exist_ok=True)
        for i in range(args.runs + 1):  # the first round warms caches and is not counted
            profile = args.profile if i == args.runs else None
            sends, queued = send_both(pairs, args.messages, deadline, profile)
            for j in (0, 1) if i % 2 else (1, 0):
                receive = pairs[j].receive(args.messages, queued[j], deadline, profile)
                if i:
                    pairs[j].rates["send"].append(sends[j])
                    pairs[j].rates["receive"].append(receive)
    except BenchError as exc:
        print(f"ratchet_throughput: error: {exc}", file=sys.stderr)
        return 1
    finally:
        relay.stop()
        shutil.rmtree(root, ignore_errors=True)
    ratchet, envelope = pairs
    medians = {f"{p.label}_{k}": statistics.median(v) for p in pairs for k, v in p.rates.items()}
    print(f"{'messages/s':<12}{'ratchet':>10}{'envelope':>10}{'ratio':>8}   "
          f"(median of {args.runs} rounds of {args.messages})", file=sys.stderr)
    result: dict[str, float | list[float]] = {}
    for step in ("send", "receive"):
        r, spread = ratios(ratchet.rates[step], envelope.rates[step])
        print(f"{step:<12}{medians[f'ratchet_{step}']:>10.0f}{medians[f'envelope_{step}']:>10.0f}{r:>8.2f}"
              f"   (quartiles {spread[0]:.2f}-{spread[1]:.2f})", file=sys.stderr)
        result |= {f"{step}_per_s": round(medians[f"ratchet_{step}"], 1),
                   f"envelope_{step}_per_s": round(medians[f"envelope_{step}"], 1), f"{step}_ratio": r,
                   f"{step}_ratio_quartiles": spread}
    load = os.getloadavg()[0]
    print(f"load average at the end: {load:.2f}", file=sys.stderr)
    print(json.dumps({**result, "messages": args.messages, "runs": args.runs, "load": round(load, 2)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
