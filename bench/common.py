"""What the benchmarks share: a real relay process, identities run through the real CLI.

Every benchmark starts its own relay on a free loopback port with a temporary SQLite file,
keeps each identity in its own TALK_HOME, and stops everything it started, even on failure.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
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
    store: str | None = None  # a `--store` spec (e.g. a Redis URL); None: the SQLite file `db`

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, deadline: Deadline) -> None:
        self.db.parent.mkdir(parents=True, exist_ok=True)
        where = ["--store", self.store] if self.store else ["--db", str(self.db)]
        cmd = [self.talk, "relay", "--host", "127.0.0.1", "--port", str(self.port), *where]
        env = {**self.base_env, "TALK_HOME": str(self.db.parent)}
        with self.log.open("wb") as log:
            self.proc = subprocess.Popen(
                cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log, env=env
            )
        wait_answering(self.proc, self.url + "/healthz", deadline, self.log_tail)

    def log_tail(self) -> str:
        return tail_of(self.log)

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        stop_process(proc)


def tail_of(log: Path) -> str:
    """The end of a server's log, for an error that says why it failed."""
    try:
        return log.read_text(errors="replace")[-2000:].strip() or "(no output)"
    except OSError:
        return "(no log)"


def wait_answering(proc: subprocess.Popen[bytes], url: str, deadline: Deadline,
                   log_tail: Callable[[], str]) -> None:
    """Return once the server `proc` started answers 200 at `url`; raise if it exits or stays silent."""
    # No proxy, whatever the environment says: the health check stays on loopback.
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    stop = time.monotonic() + deadline.timeout(RELAY_START_TIMEOUT_S)
    while time.monotonic() < stop:
        if proc.poll() is not None:
            raise BenchError(f"{url}: the server exited with {proc.returncode}: {log_tail()}")
        try:
            with opener.open(url, timeout=1) as r:
                if r.status == 200:
                    return
        except OSError:
            time.sleep(0.05)
    raise BenchError(f"{url} did not answer in time: {log_tail()}")


def stop_process(proc: subprocess.Popen[bytes] | None) -> None:
    """SIGTERM by pid, SIGKILL if it lingers: every benchmark server is stopped this way."""
    if proc is None or proc.poll() is not None:
        return
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




def relay_env() -> dict[str, str]:
    """A relay for benchmarks: rate limits and the per-address connection cap off, so they measure
    the path, not the limiter (every benchmark client comes from 127.0.0.1 and sends faster, and
    opens more mailboxes, than any agent would)."""
    limits = ("RATE_PER_CLIENT", "RATE_PER_TAG", "RATE_OWNER", "RATE_PUBLISH", "RATE_LOOKUP", "RATE_STREAM",
              "RATE_CHUNKS")
    return {**base_env(None), **{f"TALK_RELAY_{name}": "off" for name in limits},
            "TALK_RELAY_MAX_CONNECTIONS_PER_CLIENT": "0"}


def pct(values: list[float], q: float) -> float:
    """The q-quantile by nearest rank (nan for no values)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))] if ordered else float("nan")


def _terminate(signum: int, _frame: FrameType | None) -> None:
    raise SystemExit(128 + signum)  # unwind through the finally blocks that stop what was started


def begin(timeout: float) -> tuple[Deadline, str, Path]:
    """What every benchmark starts with: SIGTERM stops it cleanly, one time budget, the `talk`
    under test, and a fresh temporary folder (the caller removes it)."""
    signal.signal(signal.SIGTERM, _terminate)
    return Deadline(timeout), find_talk(), Path(tempfile.mkdtemp(prefix="talk-bench-"))
