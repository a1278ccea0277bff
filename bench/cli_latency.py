"""Wall-clock latency of the `talk` CLI, end to end, against a real relay on loopback.

What it measures (each as one child process, timed with time.perf_counter around
subprocess.run, so interpreter start-up, imports, key loading and the HTTP round trips count):

  python           `python -c pass` with the same interpreter: the floor no command can beat
  send             `talk send bob TEXT` by alice (keys stored with --no-passphrase)
  receive          `talk receive` by bob with exactly one message waiting
  send_passphrase  `talk send bob TEXT` by carol, whose keys are protected by a passphrase
                   file: the same path plus the argon2id key derivation on unlock
  send_unlocked    `talk send bob TEXT` by dave, protected as carol is, whose follower runs
                   and holds his key (`talk unlock`): the key comes from the follower instead
                   of the derivation (a talk without `talk unlock` sends as carol does)

Setup: a relay (`talk relay`) on a free 127.0.0.1 port with a temporary SQLite file, and four
identities, each in its own temporary TALK_HOME; alice, carol and dave become contacts of bob
through invite -> join -> receive. After the warm-up rounds, each round runs all five
measurements in a rotating order, so host noise hits them alike. Everything is removed
afterwards, and the relay and dave's follower are stopped, even on failure. Only loopback
traffic.

Bytecode: an installed `talk` has compiled .pyc files, but an editable install run with
PYTHONDONTWRITEBYTECODE=1 recompiles the project's own modules on every start. By default the
children therefore cache bytecode under a temporary PYTHONPYCACHEPREFIX (filled by the
warm-ups, removed afterwards); --inherit-bytecode-env measures the environment as it is.

Run it with the interpreter of the venv under test; the `talk` console script next to that
interpreter is the one measured:

    .venv/bin/python bench/cli_latency.py [--runs 20] [--warmups 2] [--timeout 600]
                                          [--baseline OTHER/.venv/bin/talk]
                                          [--baseline-env NAME=VALUE ...]
                                          [--inherit-bytecode-env]

A table (median, p90, min in ms) goes to stderr; stdout ends with one JSON line of medians:

    {"send_ms": ..., "receive_ms": ..., "python_ms": ..., "send_passphrase_ms": ...,
     "send_unlocked_ms": ..., "runs": N, "load": [1, 5, 15 min]}

With --baseline, a second `talk` (another checkout, installed in its own venv) gets a relay
and identities of its own, and the two are measured round by round, taking turns to go first,
so the machine's other work falls on both alike. The JSON line then adds the baseline's medians
(`baseline_send_ms`, ...) and `ratio`: per command, the median of the round-by-round ratios
this/baseline. That ratio, not two medians from separate runs, is what says "slower" on a busy
machine: separate runs of the same code differ by 10-20 % here.

--baseline-env NAME=VALUE sets a variable in the baseline's environment only (its relay and
identities included); without --baseline the baseline is then this same `talk`. So
`--baseline-env TALK_RATCHET=off` compares talk with forward secrecy against talk as it was
before it: identities that publish no ratchet keys, mail in today's envelope.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import shutil
import statistics
import sys
from collections.abc import Callable
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
    ndjson,
    timed,
)

PASSPHRASE = "correct horse battery staple"
NAMES = ("python", "send", "receive", "send_passphrase", "send_unlocked")


@dataclass
class Bench:
    talk: str
    alice: Agent
    bob: Agent
    carol: Agent
    dave: Agent
    deadline: Deadline
    pending: int = 0  # messages to bob sent by timed sends and not yet drained
    counter: int = 0

    def text(self) -> str:
        self.counter += 1
        return f"bench message {self.counter}"

    def python(self) -> float:
        ms, _ = timed([sys.executable, "-c", "pass"], self.alice.env(), self.deadline,
                      "python -c pass")
        return ms

    def send_from(self, agent: Agent) -> float:
        ms, _ = timed(agent.cmd("send", "bob", self.text()), agent.env(), self.deadline,
                      f"{agent.name}: talk send bob")
        self.pending += 1
        return ms

    def send(self) -> float:
        return self.send_from(self.alice)

    def send_passphrase(self) -> float:
        return self.send_from(self.carol)

    def send_unlocked(self) -> float:
        return self.send_from(self.dave)

    def receive(self) -> float:
        # Untimed: drain what the timed sends left, then leave exactly one message waiting.
        drained = ndjson(self.bob.ok(self.deadline, "receive"))
        if len(drained) != self.pending:
            raise BenchError(f"bob: expected {self.pending} waiting messages, got {len(drained)}")
        self.pending = 0
        text = self.text()
        self.alice.ok(self.deadline, "send", "bob", text)
        ms, out = timed(self.bob.cmd("receive"), self.bob.env(), self.deadline,
                        "bob: talk receive")
        lines = out.splitlines()
        if len(lines) != 1:
            raise BenchError(f"bob: talk receive printed {len(lines)} lines, expected exactly 1")
        got = json.loads(lines[0]).get("text")
        if got != text:
            raise BenchError(f"bob: talk receive returned {got!r}, expected {text!r}")
        return ms

    def round(self, index: int) -> dict[str, float]:
        steps: dict[str, Callable[[], float]] = {
            "python": self.python, "send": self.send, "receive": self.receive,
            "send_passphrase": self.send_passphrase, "send_unlocked": self.send_unlocked,
        }
        order = NAMES[index % len(NAMES):] + NAMES[:index % len(NAMES)]
        return {name: steps[name]() for name in order}


def p90(values: list[float]) -> float:
    """Nearest-rank 90th percentile."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(0.9 * len(ordered)) - 1)]


def report(samples: dict[str, list[float]], runs: int) -> str:
    rows = [f"{'command':<34} {'median':>8} {'p90':>8} {'min':>8}   (ms, {runs} runs)"]
    labels = {
        "python": "python -c pass",
        "send": "talk send (no passphrase)",
        "receive": "talk receive (1 message)",
        "send_passphrase": "talk send (passphrase, argon2id)",
        "send_unlocked": "talk send (passphrase, unlocked)",
    }
    for name in NAMES:
        v = samples[name]
        rows.append(
            f"{labels[name]:<34} {statistics.median(v):8.1f} {p90(v):8.1f} {min(v):8.1f}"
        )
    return "\n".join(rows)


def positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


def assignment(text: str) -> tuple[str, str]:
    name, sep, value = text.partition("=")
    if not sep or not name:
        raise argparse.ArgumentTypeError("expected NAME=VALUE")
    return name, value


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--runs", type=positive_int, default=20, help="timed rounds (20)")
    parser.add_argument("--warmups", type=int, default=2, help="untimed rounds first (2)")
    parser.add_argument("--timeout", type=float, default=600.0,
                        help="budget for the whole run, seconds (600)")
    parser.add_argument(
        "--baseline", metavar="TALK",
        help="another `talk` console script (say, an older checkout's venv/bin/talk), measured "
             "round by round alongside this one; prints the ratios",
    )
    parser.add_argument(
        "--baseline-env", metavar="NAME=VALUE", action="append", default=[], type=assignment,
        help="set in the baseline's environment only (repeatable); without --baseline, the "
             "baseline is this same talk (say, TALK_RATCHET=off: talk without forward secrecy)",
    )
    parser.add_argument(
        "--inherit-bytecode-env", action="store_true",
        help="keep PYTHONDONTWRITEBYTECODE/PYTHONPYCACHEPREFIX as they are (default: cache "
             ".pyc files in a temporary folder, as an installed talk would have them)",
    )
    return parser.parse_args(argv)



@dataclass
class World:
    """One `talk` under test: its own relay and three identities."""

    label: str
    relay: Relay
    bench: Bench | None = None
    samples: dict[str, list[float]] | None = None
    follower: Agent | None = None  # whose follower runs, to be stopped


def start_world(label: str, talk: str, root: Path, env: dict[str, str], deadline: Deadline) -> World:
    world = World(label, Relay(talk, root / "relay" / "relay.db", root / "relay.log", env))
    world.relay.start(deadline)
    alice = make_agent(talk, root, world.relay, "alice", None, deadline)
    bob = make_agent(talk, root, world.relay, "bob", None, deadline)
    carol = make_agent(talk, root, world.relay, "carol", PASSPHRASE, deadline)
    dave = make_agent(talk, root, world.relay, "dave", PASSPHRASE, deadline)
    befriend(alice, bob, deadline)
    befriend(bob, carol, deadline)
    befriend(bob, dave, deadline)
    world.follower = dave
    dave.ok(deadline, "follow")
    try:
        dave.ok(deadline, "unlock")
    except BenchError as exc:
        print(f"{label}: {exc}; dave sends with the key derivation, as carol does", file=sys.stderr)
    world.bench = Bench(talk, alice, bob, carol, dave, deadline)
    world.samples = {name: [] for name in NAMES}
    return world


def run_rounds(worlds: list[World], warmups: int, runs: int) -> None:
    """Round by round, each world in turn, the first one alternating: whatever the machine is
    doing meanwhile falls on both alike."""
    for i in range(warmups + runs):
        order = worlds if i % 2 == 0 else worlds[::-1]
        for world in order:
            assert world.bench is not None and world.samples is not None
            measured = world.bench.round(i)
            if i >= warmups:
                for name, ms in measured.items():
                    world.samples[name].append(ms)


def ratios(this: dict[str, list[float]], base: dict[str, list[float]]) -> dict[str, float]:
    """Per command, the median of this run's round-by-round ratios to the baseline's."""
    return {name: round(statistics.median(a / b for a, b in zip(this[name], base[name], strict=True)), 3)
            for name in NAMES if name != "python"}


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    deadline, talk, root = begin(args.timeout)
    env = base_env(None if args.inherit_bytecode_env else root / "pycache")
    worlds: list[World] = []
    try:
        worlds.append(start_world("this", talk, root / "this", env, deadline))
        if args.baseline or args.baseline_env:
            worlds.append(start_world("baseline", args.baseline or talk, root / "baseline",
                                      {**env, **dict(args.baseline_env)}, deadline))
        run_rounds(worlds, max(0, args.warmups), args.runs)
    except BenchError as exc:
        print(f"cli_latency: error: {exc}", file=sys.stderr)
        return 1
    finally:
        for world in worlds:
            if world.follower is not None:
                with contextlib.suppress(BenchError):
                    world.follower.ok(Deadline(30.0), "stop")
            world.relay.stop()
        shutil.rmtree(root, ignore_errors=True)
    mode = "inherited from the environment" if args.inherit_bytecode_env else "cached (temp)"
    out: dict[str, object] = {}
    for world in worlds:
        assert world.samples is not None
        settings = " ".join(f"{k}={v}" for k, v in args.baseline_env) if world.label == "baseline" else ""
        title = f"{world.label}: {world.relay.talk} {settings}\n" if len(worlds) > 1 else ""
        print(title + report(world.samples, args.runs), file=sys.stderr)
        prefix = "" if world.label == "this" else "baseline_"
        out.update({f"{prefix}{name}_ms": round(statistics.median(world.samples[name]), 1)
                    for name in NAMES})
    if len(worlds) == 2:
        assert worlds[0].samples is not None and worlds[1].samples is not None
        out["ratio"] = r = ratios(worlds[0].samples, worlds[1].samples)
        print("ratio to the baseline (median of round-by-round ratios): "
              + ", ".join(f"{k} {v:.3f}" for k, v in r.items()), file=sys.stderr)
    print(f"bytecode: {mode}; load average at the end: {os.getloadavg()[0]:.2f}", file=sys.stderr)
    print(json.dumps({**out, "runs": args.runs, "load": list(os.getloadavg())}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
