"""Wall-clock cost of the Codex hook on a turn with no mail: what every Codex turn pays.

What it measures (each as one child process, timed with time.perf_counter around
subprocess.run, so interpreter start-up and imports count):

  hook        alarms/codex_hook.py run as `talk install codex` writes it (`PYTHON -I -S HOOK
              --talk-home DIR`), a Stop payload on stdin, its session registered and its spool
              empty: the answer must be `{}`
  python      `python -c pass` with the same interpreter (site and the venv loaded)
  python_is   `python -I -S -c pass`: the floor the hook itself starts from

Setup: a temporary TALK_HOME with one identity (`talk init bench --no-passphrase`; the relay
is not needed, so its "keys not published" complaint is expected and ignored) and one Codex
session registered under this process's pid. Rounds rotate the order of the three
measurements so host noise hits them alike. Everything is removed afterwards.

    .venv/bin/python bench/hook_latency.py [--runs 20] [--warmups 3] [--timeout 300]

A table (median, p90, min in ms) goes to stderr; stdout ends with one JSON line of medians:

    {"hook_ms": ..., "python_ms": ..., "python_is_ms": ..., "runs": N}

Target: hook_ms <= 40.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from common import BenchError, Deadline, base_env, find_talk, timed

ROOT = Path(__file__).resolve().parent.parent
HOOK = ROOT / "alarms" / "codex_hook.py"
SID = "bench-session"
NAMES = ("hook", "python", "python_is")
TARGET_MS = 40.0


def setup(talk: str, home: Path, env: dict[str, str], deadline: Deadline) -> None:
    """One identity and one registered codex session with an empty spool."""
    subprocess.run([talk, "init", "bench", "--no-passphrase"], env={**env, "TALK_HOME": str(home),
                   "TALK_RELAY": "http://127.0.0.1:9"}, capture_output=True, timeout=deadline.timeout())
    if not (home / "bench" / "identity.json").is_file():
        raise BenchError(f"talk init made no identity in {home}")
    sys.path.insert(0, str(ROOT))
    from alarms.mailbox import SessionMail

    SessionMail(home / "bench", SID).register("codex", os.getpid())


def measure(name: str, home: Path, env: dict[str, str], deadline: Deadline) -> float:
    payload = json.dumps({"session_id": SID, "hook_event_name": "Stop", "stop_hook_active": False})
    if name == "hook":
        cmd = [sys.executable, "-I", "-S", str(HOOK), "--talk-home", str(home)]
        return timed_with_input(cmd, env, payload, deadline)
    cmd = [sys.executable, "-c", "pass"] if name == "python" else [sys.executable, "-I", "-S", "-c", "pass"]
    ms, _ = timed(cmd, env, deadline, name)
    return ms


def timed_with_input(cmd: list[str], env: dict[str, str], payload: str, deadline: Deadline) -> float:
    import time

    start = time.perf_counter()
    p = subprocess.run(cmd, input=payload, capture_output=True, text=True, env=env,
                       timeout=deadline.timeout())
    elapsed = (time.perf_counter() - start) * 1000.0
    if p.returncode != 0 or p.stdout.strip() != "{}":
        raise BenchError(f"hook answered {p.stdout.strip()!r} (exit {p.returncode}), expected {{}}: "
                         f"{p.stderr}")
    return elapsed


def p90(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[max(0, math.ceil(0.9 * len(ordered)) - 1)]


def report(samples: dict[str, list[float]], runs: int) -> str:
    labels = {"hook": "codex_hook.py Stop, nothing new", "python": "python -c pass",
              "python_is": "python -I -S -c pass"}
    rows = [f"{'command':<34} {'median':>8} {'p90':>8} {'min':>8}   (ms, {runs} runs)"]
    for name in NAMES:
        v = samples[name]
        rows.append(f"{labels[name]:<34} {statistics.median(v):8.1f} {p90(v):8.1f} {min(v):8.1f}")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--warmups", type=int, default=3)
    parser.add_argument("--timeout", type=float, default=300.0)
    args = parser.parse_args(argv)
    deadline = Deadline(args.timeout)
    root = Path(tempfile.mkdtemp(prefix="talk-hook-bench-"))
    env = base_env(None)
    samples: dict[str, list[float]] = {name: [] for name in NAMES}
    try:
        setup(find_talk(), root / "home", env, deadline)
        for i in range(args.warmups + args.runs):
            order = NAMES[i % len(NAMES):] + NAMES[:i % len(NAMES)]
            for name in order:
                ms = measure(name, root / "home", env, deadline)
                if i >= args.warmups:
                    samples[name].append(ms)
    except BenchError as exc:
        print(f"hook_latency: error: {exc}", file=sys.stderr)
        return 1
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(report(samples, args.runs) + f"\ntarget: hook <= {TARGET_MS:.0f} ms", file=sys.stderr)
    medians = {f"{name}_ms": round(statistics.median(samples[name]), 1) for name in NAMES}
    print(json.dumps({**medians, "runs": args.runs}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
