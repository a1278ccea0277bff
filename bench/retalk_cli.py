"""`talk receive` and `talk send` beside retalk 0.3.0's same commands, in one run.

What it measures (each as one child process, timed with time.perf_counter around
subprocess.run: interpreter start-up, imports, key loading and the HTTP round trips count):

  receive   bob takes exactly one waiting message from alice
            (talk: `talk receive`; retalk: `retalk receive --peer alice -u bob`)
  send      alice sends one message to bob
            (talk: `talk send bob TEXT`; retalk: `retalk send --peer bob TEXT -u alice`)

Setup, for each tool: its own relay on a free 127.0.0.1 port with a temporary SQLite file
(`talk relay`; `retalk-server`, found next to the `retalk` given), and two identities without a
passphrase, each in its own home, made contacts of each other. Everything between the timed
commands is untimed and leaves both tools in the same steady state each round: the message
sent for a receive goes first, and afterwards each side takes what the other left for it
(retalk's acks, which otherwise pile up and are sent again with every send; talk's receipts).
Each round runs the four measurements in a rotating order, so host noise hits both alike.

    .venv/bin/python bench/retalk_cli.py --retalk RETALK_VENV/bin/retalk [--runs 20] [--warmups 2]

The `talk` measured is the one beside the interpreter that runs this. retalk is an ordinary
install; an editable one of talk (`pip install -e`) also pays its import hook's modules on
every start (about 6 ms here), so compare installs of the same kind (`pip install .` into a
venv of its own) for the figure a user sees.

A table goes to stderr; stdout ends with one JSON line: the medians in ms, `ratio` (per
command, the median of the round-by-round ratios talk/retalk: below 1, talk is faster) and the
load average. Without --retalk, or where it names no program, it says so and prints talk's
figures only.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from common import (
    BenchError,
    Deadline,
    Relay,
    base_env,
    befriend,
    begin,
    make_agent,
    ndjson,
    run_checked,
    timed,
    wait_answering,
)

COMMANDS = ("receive", "send")


@dataclass
class Pair:
    """Two identities of one tool, alice writing to bob: the commands of each tool's CLI."""

    tool: str
    sender_cmd: Callable[[str], list[str]]  # alice sends TEXT to bob
    receive_cmd: list[str]  # bob takes his mail from alice
    drain_cmd: list[str]  # alice takes what bob's receive left for her
    sender_env: dict[str, str]
    receiver_env: dict[str, str]
    deadline: Deadline
    counter: int = 0

    def text(self) -> str:
        self.counter += 1
        return f"bench message {self.counter}"

    def receive(self) -> float:
        text = self.text()
        run_checked(self.sender_cmd(text), self.sender_env, self.deadline, f"{self.tool}: alice send")
        ms, out = timed(self.receive_cmd, self.receiver_env, self.deadline, f"{self.tool}: bob receive")
        check_one(self.tool, out, text)
        self.drain()
        return ms

    def send(self) -> float:
        text = self.text()
        ms, _ = timed(self.sender_cmd(text), self.sender_env, self.deadline, f"{self.tool}: alice send")
        out = run_checked(self.receive_cmd, self.receiver_env, self.deadline, f"{self.tool}: bob receive")
        check_one(self.tool, out, text)
        self.drain()
        return ms

    def drain(self) -> None:
        run_checked(self.drain_cmd, self.sender_env, self.deadline, f"{self.tool}: alice receive")


def check_one(tool: str, out: str, text: str) -> None:
    """The receive printed exactly the one message sent, and nothing else."""
    got = [m.get("text") for m in ndjson(out)]
    if got != [text]:
        raise BenchError(f"{tool}: bob's receive printed {got!r}, expected [{text!r}]")


def talk_pair(talk: str, relay: Relay, root: Path, deadline: Deadline) -> Pair:
    relay.start(deadline)
    alice = make_agent(talk, root, relay, "alice", None, deadline)
    bob = make_agent(talk, root, relay, "bob", None, deadline)
    befriend(alice, bob, deadline)
    pair = Pair(
        "talk",
        lambda text: alice.cmd("send", "bob", text),
        bob.cmd("receive"),
        alice.cmd("receive"),
        alice.env(),
        bob.env(),
        deadline,
    )
    return pair


class RetalkServer(Relay):
    """retalk's relay, `retalk-server` (in `talk`'s place), stopped as talk's is."""

    def start(self, deadline: Deadline) -> None:
        # retalk-server 0.3.0 creates its tables at import, in the file its environment names;
        # `--db` would point it at another, empty one. The folder is its working directory too.
        cmd = [self.talk, "--host", "127.0.0.1", "--port", str(self.port)]
        env = {**self.base_env, "RETALK_SERVER_DB": str(self.db)}
        with self.log.open("wb") as log:
            self.proc = subprocess.Popen(
                cmd,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=log,
                env=env,
                cwd=self.db.parent,
            )
        wait_answering(self.proc, self.url + "/info", deadline, self.log_tail)


def retalk_pair(
    retalk: str, server: RetalkServer, root: Path, env: dict[str, str], deadline: Deadline
) -> Pair:
    home = {**env, "RETALK_HOME": str(root / "home")}
    server.start(deadline)
    fingerprints = {}
    for name in ("alice", "bob"):
        out = run_checked(
            [retalk, "init", "-u", name, "--no-passphrase", "-r", server.url],
            home,
            deadline,
            f"retalk: {name}",
        )
        fingerprints[name] = out.strip().splitlines()[-1]
    for name, other in (("alice", "bob"), ("bob", "alice")):
        run_checked(
            [retalk, "add", fingerprints[other], "--peer", other, "-u", name],
            home,
            deadline,
            f"retalk: {name}",
        )
    return Pair(
        "retalk",
        lambda text: [retalk, "send", "--peer", "bob", text, "-u", "alice"],
        [retalk, "receive", "--peer", "alice", "-u", "bob"],
        [retalk, "receive", "--peer", "bob", "-u", "alice"],
        home,
        home,
        deadline,
    )


def ratio(this: list[float], base: list[float]) -> float:
    """The median of the round-by-round ratios this/base."""
    return round(statistics.median(a / b for a, b in zip(this, base, strict=True)), 3)


def run_rounds(pairs: list[Pair], warmups: int, runs: int) -> dict[str, dict[str, list[float]]]:
    """Samples per tool and command; each round rotates the order of all the measurements."""
    steps = [(pair, name) for name in COMMANDS for pair in pairs]
    samples: dict[str, dict[str, list[float]]] = {p.tool: {name: [] for name in COMMANDS} for p in pairs}
    for i in range(warmups + runs):
        k = i % len(steps)
        for pair, name in steps[k:] + steps[:k]:
            ms = getattr(pair, name)()
            if i >= warmups:
                samples[pair.tool][name].append(ms)
    return samples


def summary(samples: dict[str, dict[str, list[float]]], runs: int) -> tuple[str, dict[str, object]]:
    rows = [f"{'command':<18} {'median':>8} {'min':>8}   (ms, {runs} runs)"]
    out: dict[str, object] = {}
    for tool, by_name in samples.items():
        prefix = "" if tool == "talk" else f"{tool}_"
        for name, values in by_name.items():
            rows.append(f"{tool + ' ' + name:<18} {statistics.median(values):8.1f} {min(values):8.1f}")
            out[f"{prefix}{name}_ms"] = round(statistics.median(values), 1)
    if "retalk" in samples:
        ratios = {name: ratio(samples["talk"][name], samples["retalk"][name]) for name in COMMANDS}
        out["ratio"] = ratios
        shown = ", ".join(f"{k} {v:.3f}" for k, v in ratios.items())
        rows.append(f"talk/retalk (median of round-by-round ratios): {shown}")
    return "\n".join(rows), out


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument(
        "--retalk",
        metavar="PATH",
        help="retalk 0.3.0's `retalk` console script (its `retalk-server` beside it)",
    )
    parser.add_argument("--runs", type=int, default=20, help="timed rounds (20)")
    parser.add_argument("--warmups", type=int, default=2, help="untimed rounds first (2)")
    parser.add_argument("--timeout", type=float, default=900.0, help="budget for the whole run, seconds")
    return parser.parse_args(argv)


def retalk_programs(given: str | None) -> tuple[str, str] | None:
    """(retalk, retalk-server), or None with the reason on stderr."""
    if not given:
        print("retalk_cli: no --retalk given: retalk is not measured, talk's figures only", file=sys.stderr)
        return None
    server = str(Path(given).with_name("retalk-server"))
    missing = [p for p in (given, server) if not os.access(p, os.X_OK)]
    if missing:
        print(
            f"retalk_cli: retalk is not installed there ({', '.join(missing)} missing): talk's figures only",
            file=sys.stderr,
        )
        return None
    return given, server


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    programs = retalk_programs(args.retalk)
    deadline, talk, root = begin(args.timeout)
    env = {k: v for k, v in base_env(root / "pycache").items() if not k.startswith("RETALK_")}
    relay = Relay(talk, root / "talk" / "relay" / "relay.db", root / "relay.log", env)
    server: RetalkServer | None = None
    try:
        pairs = [talk_pair(talk, relay, root / "talk", deadline)]
        if programs is not None:
            (root / "retalk").mkdir()
            server = RetalkServer(programs[1], root / "retalk" / "server.db", root / "retalk.log", env)
            pairs.append(retalk_pair(programs[0], server, root / "retalk", env, deadline))
        samples = run_rounds(pairs, max(0, args.warmups), args.runs)
    except BenchError as exc:
        print(f"retalk_cli: error: {exc}", file=sys.stderr)
        return 1
    finally:
        relay.stop()
        if server is not None:
            server.stop()
        shutil.rmtree(root, ignore_errors=True)
    table, out = summary(samples, args.runs)
    print(table, file=sys.stderr)
    print(json.dumps({**out, "runs": args.runs, "load": round(os.getloadavg()[0], 2)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
