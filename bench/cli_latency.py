"""Wall-clock latency of the `talk` CLI, end to end, against a real relay on loopback.

What it measures (each as one child process, timed with time.perf_counter around
subprocess.run, so interpreter start-up, imports, key loading and the HTTP round trips count):

  python           `python -c pass` with the same interpreter: the floor no command can beat
  send             `talk send bob TEXT` by alice (keys stored with --no-passphrase)
  receive          `talk receive` by bob with exactly one message waiting
  send_passphrase  `talk send bob TEXT` by carol, whose keys are protected by a passphrase
                   file: the same path plus the argon2id key derivation on unlock

Setup: a relay (`talk relay`) on a free 127.0.0.1 port with a temporary SQLite file, and three
identities, each in its own temporary TALK_HOME; alice and carol become contacts of bob through
invite -> join -> receive. After the warm-up rounds, each round runs all four measurements in
a rotating order, so host noise hits them alike. Everything is removed afterwards, and the
relay is stopped by its PID, even on failure. Only loopback traffic.

Bytecode: an installed `talk` has compiled .pyc files, but an editable install run with
PYTHONDONTWRITEBYTECODE=1 recompiles the project's own modules on every start. By default the
children therefore cache bytecode under a temporary PYTHONPYCACHEPREFIX (filled by the
warm-ups, removed afterwards); --inherit-bytecode-env measures the environment as it is.

Run it with the interpreter of the venv under test; the `talk` console script next to that
interpreter is the one measured:

    .venv/bin/python bench/cli_latency.py [--runs 20] [--warmups 2] [--timeout 600]
                                          [--inherit-bytecode-env]

A table (median, p90, min in ms) goes to stderr; stdout ends with one JSON line of medians:

    {"send_ms": ..., "receive_ms": ..., "python_ms": ..., "send_passphrase_ms": ..., "runs": N}
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType

COMMAND_TIMEOUT_S = 30.0
RELAY_START_TIMEOUT_S = 15.0
PASSPHRASE = "correct horse battery staple"
NAMES = ("python", "send", "receive", "send_passphrase")


class BenchError(RuntimeError):
    """A step of the benchmark failed; the message says which and why."""


def find_talk() -> str:
    """The `talk` console script installed next to this interpreter (not resolved: a venv's
    python is often a symlink to the base interpreter, whose bin has no `talk`)."""
    found = shutil.which("talk", path=os.path.dirname(sys.executable))
    if found is None:
        raise BenchError(
            f"no `talk` console script next to {sys.executable}; "
            "run this with the python of the venv where talk is installed"
        )
    return found


def base_env(pycache: Path | None) -> dict[str, str]:
    """The children's environment: ours without TALK_*; with `pycache`, bytecode is written to
    and read from that folder whatever PYTHONDONTWRITEBYTECODE says, as after a normal install
    (which compiles .pyc files), without writing __pycache__ folders into the source tree."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TALK_")}
    if pycache is not None:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = str(pycache)
    return env


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Deadline:
    """One budget for the whole run: every child process gets at most what is left of it."""

    def __init__(self, seconds: float) -> None:
        self.end = time.monotonic() + seconds

    def timeout(self, cap: float = COMMAND_TIMEOUT_S) -> float:
        left = self.end - time.monotonic()
        if left <= 0:
            raise BenchError("benchmark time budget exhausted; raise --timeout or lower --runs")
        return min(cap, left)


@dataclass
class Relay:
    talk: str
    db: Path
    log: Path
    base_env: dict[str, str]
    port: int = field(default_factory=free_port)
    proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, deadline: Deadline) -> None:
        self.db.parent.mkdir(parents=True, exist_ok=True)
        cmd = [self.talk, "relay", "--host", "127.0.0.1", "--port", str(self.port),
               "--db", str(self.db)]
        env = {**self.base_env, "TALK_HOME": str(self.db.parent)}
        with self.log.open("wb") as log:
            self.proc = subprocess.Popen(
                cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log, env=env
            )
        # No proxy, whatever the environment says: the health check stays on loopback.
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        stop = time.monotonic() + deadline.timeout(RELAY_START_TIMEOUT_S)
        while time.monotonic() < stop:
            if self.proc.poll() is not None:
                raise BenchError(f"relay exited with {self.proc.returncode}: {self.log_tail()}")
            try:
                with opener.open(self.url + "/healthz", timeout=1) as r:
                    if r.status == 200:
                        return
            except OSError:
                time.sleep(0.05)
        raise BenchError(f"relay did not answer /healthz in time: {self.log_tail()}")

    def log_tail(self) -> str:
        try:
            return self.log.read_text(errors="replace")[-2000:].strip() or "(no output)"
        except OSError:
            return "(no log)"

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is None:
            return
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.kill(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)


@dataclass
class Agent:
    """One identity in its own TALK_HOME, as on its own machine."""

    talk: str
    name: str
    home: Path
    relay_url: str
    base_env: dict[str, str]
    passphrase_file: Path | None = None

    def env(self) -> dict[str, str]:
        env = dict(self.base_env)
        env["TALK_HOME"] = str(self.home)
        env["TALK_RELAY"] = self.relay_url
        if self.passphrase_file is not None:
            env["TALK_PASSPHRASE_FILE"] = str(self.passphrase_file)
        return env

    def cmd(self, *args: str) -> list[str]:
        return [self.talk, *args]

    def ok(self, deadline: Deadline, *args: str) -> str:
        """Run `talk ARGS` untimed; its stdout, or a BenchError saying what went wrong."""
        return run_checked(self.cmd(*args), self.env(), deadline, f"{self.name}: talk")


def run_checked(cmd: list[str], env: dict[str, str], deadline: Deadline, label: str) -> str:
    try:
        p = subprocess.run(
            cmd, stdin=subprocess.DEVNULL, capture_output=True, text=True, env=env,
            timeout=deadline.timeout(),
        )
    except subprocess.TimeoutExpired as exc:
        raise BenchError(f"{label} {' '.join(cmd[1:])} timed out after {exc.timeout:.1f}s") from exc
    if p.returncode != 0:
        raise BenchError(
            f"{label} {' '.join(cmd[1:])} exited {p.returncode}: {p.stderr.strip()}"
        )
    return p.stdout


def timed(cmd: list[str], env: dict[str, str], deadline: Deadline, label: str) -> tuple[float, str]:
    """Milliseconds of one subprocess.run of `cmd`, and its stdout; failures raise."""
    timeout = deadline.timeout()
    start = time.perf_counter()
    try:
        p = subprocess.run(
            cmd, stdin=subprocess.DEVNULL, capture_output=True, text=True, env=env,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired as exc:
        raise BenchError(f"{label} timed out after {timeout:.1f}s") from exc
    elapsed = (time.perf_counter() - start) * 1000.0
    if p.returncode != 0:
        raise BenchError(f"{label} exited {p.returncode}: {p.stderr.strip()}")
    return elapsed, p.stdout


def ndjson(out: str) -> list[dict[str, object]]:
    return [json.loads(line) for line in out.splitlines() if line.strip()]


def make_agent(talk: str, root: Path, relay: Relay, name: str, passphrase: str | None,
               deadline: Deadline) -> Agent:
    pfile = None
    if passphrase is not None:
        pfile = root / f"{name}.pass"
        pfile.write_text(passphrase + "\n")
        pfile.chmod(0o600)
    agent = Agent(talk, name, root / f"home-{name}", relay.url, relay.base_env, pfile)
    agent.ok(deadline, "init", name, *([] if pfile else ["--no-passphrase"]))
    return agent


def befriend(inviter: Agent, joiner: Agent, deadline: Deadline) -> None:
    """invite -> join -> the inviter's receive accepts -> the joiner's receive sees it."""
    code = json.loads(inviter.ok(deadline, "invite", "--json"))["code"]
    joiner.ok(deadline, "join", code)
    for agent in (inviter, joiner):
        kinds = [m.get("kind") for m in ndjson(agent.ok(deadline, "receive"))]
        if kinds != ["contact_accepted"]:
            raise BenchError(f"{agent.name}: expected one contact_accepted, got {kinds}")


@dataclass
class Bench:
    talk: str
    alice: Agent
    bob: Agent
    carol: Agent
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
            "send_passphrase": self.send_passphrase,
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


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--runs", type=positive_int, default=20, help="timed rounds (20)")
    parser.add_argument("--warmups", type=int, default=2, help="untimed rounds first (2)")
    parser.add_argument("--timeout", type=float, default=600.0,
                        help="budget for the whole run, seconds (600)")
    parser.add_argument(
        "--inherit-bytecode-env", action="store_true",
        help="keep PYTHONDONTWRITEBYTECODE/PYTHONPYCACHEPREFIX as they are (default: cache "
             ".pyc files in a temporary folder, as an installed talk would have them)",
    )
    return parser.parse_args(argv)


def _terminate(signum: int, _frame: FrameType | None) -> None:
    raise SystemExit(128 + signum)  # unwind through the finally blocks


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    signal.signal(signal.SIGTERM, _terminate)
    deadline = Deadline(args.timeout)
    talk = find_talk()
    root = Path(tempfile.mkdtemp(prefix="talk-bench-"))
    env = base_env(None if args.inherit_bytecode_env else root / "pycache")
    relay = Relay(talk, root / "relay" / "relay.db", root / "relay.log", env)
    try:
        relay.start(deadline)
        alice = make_agent(talk, root, relay, "alice", None, deadline)
        bob = make_agent(talk, root, relay, "bob", None, deadline)
        carol = make_agent(talk, root, relay, "carol", PASSPHRASE, deadline)
        befriend(alice, bob, deadline)
        befriend(bob, carol, deadline)
        bench = Bench(talk, alice, bob, carol, deadline)
        for i in range(max(0, args.warmups)):
            bench.round(i)
        samples: dict[str, list[float]] = {name: [] for name in NAMES}
        for i in range(args.runs):
            for name, ms in bench.round(i).items():
                samples[name].append(ms)
    except BenchError as exc:
        print(f"cli_latency: error: {exc}", file=sys.stderr)
        return 1
    finally:
        relay.stop()
        shutil.rmtree(root, ignore_errors=True)
    mode = "inherited from the environment" if args.inherit_bytecode_env else "cached (temp)"
    print(report(samples, args.runs) + f"\nbytecode: {mode}", file=sys.stderr)
    medians = {f"{name}_ms": round(statistics.median(samples[name]), 1)
               for name in ("send", "receive", "python", "send_passphrase")}
    print(json.dumps({**medians, "runs": args.runs}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
