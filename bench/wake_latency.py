"""Wake latency: `talk send` → the fake model's first request carrying the message, per host.

Each host program (Claude Code, the Codex TUI, pi, Gemini CLI, Qwen Code and Copilot CLI in tmux;
`opencode serve`)
runs the real pinned release from tests/hosts against the fake model on loopback, wired as a
user would wire it: a real relay, alice and bob made contacts through the CLI, bob's follower,
and the host's alarm (Claude Code: `talk install claude` plugin, monitor and hooks; Codex:
`talk install codex` hooks and the waker they start; codex-run: the TUI under `talk run codex`,
whose door is a second client of talk's own app-server, with the hooks installed too; opencode:
`talk door opencode`; pi:
`talk install pi`'s extension and the door it starts; Gemini CLI: `talk install gemini` hooks,
which no outside event can run while it is idle; Qwen Code: `talk install qwen`, whose
SessionStart hook starts the Qwen door; Copilot CLI: `talk install copilot` hooks, which nothing
from outside can run in an idle session; copilot-run: the same hooks, with Copilot started by
`talk run copilot`, whose door sends mail through Copilot's JSON-RPC port; copilot-ext: a plain
`copilot` with its extensions on, talk's extension opening the door). Whatever doors the
installed talk has are what is measured. Three modes per host:

  first    mail waits in bob's spool before the host starts; the bench starts the session and
           types nothing. The figure is the launch → the first model request carrying the
           message: how soon a freshly started session is reachable (its own start-up included).
           A host that is not reached before a first prompt shows `not_delivered` (watched for
           --wait s, or its `idle_wait`), and the mail then goes with the first prompt.
  idle     the session sits idle after a first turn; alice sends; the figure is the start of
           `talk send` → the first model request carrying the message (target ≤ 1 s)
  midturn  a turn is busy in a shell tool call (the fake model answers RUN_TOOL with a call
           that waits for a flag file); alice sends; --hold s after the message is in bob's
           spool the bench ends the tool. The figure is the lag from the tool's end (the
           tool-call boundary) → the first request carrying the message (target ≤ 1 s). The
           host's own boundary, tool end → its next request (carrying the tool's output), is
           the baseline no door can beat, reported alongside.

Each mid-turn run says where the message came: `at_boundary` (in the request right after the
tool: delivered mid-turn), `after_turn` (only after the turn's last step: not delivered
mid-turn; its lag is still reported, and flagged), `during_tool` (before the tool ended), or
`not_delivered` (not within --wait s). Between runs the bench waits for the session to be idle.

    .venv/bin/python bench/wake_latency.py [--hosts claude,codex,codex-run,opencode,pi,gemini,qwen,copilot,
                                                    copilot-run,copilot-ext] [--runs 5] [--hold 2] [--wait 60]
                                           [--timeout 1800]

A table goes to stderr; stdout ends with one JSON line:

    {"bench":"wake_latency","load":…,"runs":N,"results":{"claude":{"idle_median_s":…,
     "midturn_lag_median_s":…,…},…}}

A host that cannot be set up (npm missing, a host that never became ready) gets {"error": …}
and the others still run. Needs tmux, Node.js and npm (the hosts install on first use).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from tests.hosts.tmux import Tmux

from common import Agent, BenchError, Deadline, Relay, befriend, begin, make_agent, pct, relay_env

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # tests/hosts: the host programs, the fake model, their configs

HOSTS = ("claude", "codex", "codex-run", "opencode", "pi", "gemini", "qwen", "copilot", "copilot-run",
         "copilot-ext")
MODES = ("idle", "midturn")  # repeated --runs times; "first" is once per host, at its start
TARGET_S = 1.0
OUTCOMES = ("woken", "at_boundary", "after_turn", "during_tool", "not_delivered")
READY_S = 90.0  # a host's first start on a loaded 2-core machine
IDLE_S = 90.0  # a turn, with the hooks it runs, ends within this
POLL_S = 0.01


# --- pure parts: one run's outcome, the statistics, the JSON line ---------------------------------

@dataclass
class Sample:
    """One run. Times are wall-clock (time.time(), as the fake model stamps its requests)."""

    mode: str
    sent: float  # `talk send` started
    spooled: float | None = None  # the message first seen in bob's spool
    seen: float | None = None  # the first model request carrying it
    seen_n: int | None = None
    tool_end: float | None = None  # midturn: the flag that ends the tool was made
    boundary: float | None = None  # midturn: the request after the tool (carrying its output)
    boundary_n: int | None = None

    @property
    def outcome(self) -> str:
        return outcome(self.mode, self.seen_n, self.boundary_n)

    launched: float | None = None  # first: the host's start began

    @property
    def latency(self) -> float | None:
        """first: launch → request; idle: send → request; midturn: tool end → request."""
        start = {"first": self.launched, "idle": self.sent}.get(self.mode, self.tool_end)
        return None if self.seen is None or start is None else self.seen - start


def outcome(mode: str, seen_n: int | None, boundary_n: int | None) -> str:
    """Where the message reached the model, from request numbers."""
    if seen_n is None:
        return "not_delivered"
    if mode in ("first", "idle"):
        return "woken"
    if boundary_n is None or seen_n > boundary_n:
        return "after_turn"
    return "at_boundary" if seen_n == boundary_n else "during_tool"


def seconds(value: float) -> float:
    return round(value, 3)


def stats(values: list[float]) -> dict[str, float | None]:
    """median and nearest-rank p90, rounded to ms; None for no values."""
    if not values:
        return {"median": None, "p90": None}
    return {"median": seconds(statistics.median(values)), "p90": seconds(pct(values, 0.9))}


def summarize(samples: list[Sample]) -> dict[str, Any]:
    """One host's figures, keyed for the JSON line."""
    out: dict[str, Any] = {}
    for first in (s for s in samples if s.mode == "first"):
        out.update(first_s=None if first.latency is None else seconds(first.latency),
                   first_outcome=first.outcome)
    idle = [s for s in samples if s.mode == "idle"]
    if idle:
        got = [s.latency for s in idle if s.latency is not None]
        st = stats(got)
        out.update(idle_median_s=st["median"], idle_p90_s=st["p90"],
                   idle_delivered=f"{len(got)}/{len(idle)}")
        spool = [s.spooled - s.sent for s in idle if s.spooled is not None]
        out["idle_send_to_spool_median_s"] = stats(spool)["median"]
    mid = [s for s in samples if s.mode == "midturn"]
    if mid:
        lags = [s.latency for s in mid if s.latency is not None]
        st = stats(lags)
        base = [s.boundary - s.tool_end for s in mid if s.boundary is not None and s.tool_end is not None]
        counts = {name: sum(s.outcome == name for s in mid) for name in OUTCOMES if name != "woken"}
        out.update(midturn_lag_median_s=st["median"], midturn_lag_p90_s=st["p90"],
                   midturn_boundary_median_s=stats(base)["median"],
                   midturn_outcomes={k: v for k, v in counts.items() if v})
        if counts["at_boundary"] < len(mid):
            out["midturn_flag"] = (f"not delivered mid-turn in {len(mid) - counts['at_boundary']} of "
                                   f"{len(mid)} runs")
    return out


def result_line(results: dict[str, dict[str, Any]], runs: int, load: float) -> dict[str, Any]:
    return {"bench": "wake_latency", "load": round(load, 2), "runs": runs, "results": results}


def table(host: str, samples: list[Sample]) -> str:
    rows = []
    for mode in ("first", *MODES):
        mine = [s for s in samples if s.mode == mode]
        if not mine:
            continue
        got = [x for x in (s.latency for s in mine) if x is not None]
        st = stats(got)
        what = {"first": "launch → request", "idle": "send → request"}.get(mode, "tool end → request")
        med = "-" if st["median"] is None else f"{st['median']:.2f}"
        p90 = "-" if st["p90"] is None else f"{st['p90']:.2f}"
        outcomes = ", ".join(f"{n} {k}" for k in OUTCOMES if (n := sum(s.outcome == k for s in mine)))
        rows.append(f"{host:<9} {mode:<8} {what:<19} {med:>7} {p90:>7}   {outcomes}")
    return "\n".join(rows)


def carries(needle: str) -> Callable[[dict[str, Any]], bool]:
    return lambda r: any(needle in t for t in r["texts"] + r["system_texts"])


# --- the harness: hosts, their homes, their processes ------------------------------------------

def wait(check: Callable[[], Any], timeout: float, what: str, step: float = 0.05) -> Any:
    """The tests' wait_for, failing as the bench fails: a BenchError for that host's result."""
    from tests.conftest import wait_for

    try:
        return wait_for(check, timeout, what, step)
    except AssertionError as exc:
        raise BenchError(str(exc)) from None


class SpoolWatch:
    """Notes when a needle first shows in any of bob's spool files, polling in a thread."""

    def __init__(self, spool: Path, needle: str) -> None:
        self.spool, self.needle = spool, needle.encode()
        self.at: float | None = None
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stopped.is_set():
            for path in self.spool.rglob("*.ndjson*"):
                with contextlib.suppress(OSError):
                    if self.needle in path.read_bytes():
                        self.at = time.time()
                        return
            time.sleep(POLL_S)

    def wait(self, timeout: float) -> float | None:
        self.thread.join(timeout)
        return self.at

    def stop(self) -> None:
        self.stopped.set()
        self.thread.join(5)


@dataclass
class Rig:
    """What every host shares: bob and alice as contacts, bob's follower, a throwaway HOME."""

    alice: Agent
    bob: Agent
    root: Path
    home: Path
    project: Path
    deadline: Deadline
    host_bin: Path

    @property
    def folder(self) -> Path:
        return self.bob.home / "bob"

    def sessions(self) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = json.loads(self.bob.ok(self.deadline, "session", "list", "--json"))
        return out

    def live_session(self, host: str) -> dict[str, Any] | None:
        live = [s for s in self.sessions() if s["host"] == host and s["alive"]]
        return live[0] if live else None


class Host(Protocol):
    name: str

    def start(self, rig: Rig, model_url: str) -> None: ...
    def prompt(self, text: str) -> None: ...
    def idle(self) -> bool: ...
    def stop(self) -> None: ...


class Claude:
    """Interactive Claude Code in tmux with talk's plugin (`--plugin-dir`), Bash allowed."""

    name = "claude"

    def __init__(self) -> None:
        self.tmux: Tmux | None = None

    def start(self, rig: Rig, model_url: str) -> None:
        from tests.hosts.configs import claude_env, seed_claude_home
        from tests.hosts.npm import host_env

        plugin = rig.root / "plugin"
        rig.bob.ok(rig.deadline, "install", "claude", "--dir", str(plugin), "--json")
        seed_claude_home(rig.home, rig.project)
        env = host_env(rig.home, **claude_env(model_url), TERM="xterm-256color")
        from tests.hosts.tmux import Tmux

        self.tmux = Tmux(env, "wake")
        self.tmux.start(rig.project, [str(rig.host_bin / "claude"), "--plugin-dir", str(plugin),
                                      "--allowedTools", "Bash"])
        wait(lambda: rig.live_session("claude"), READY_S, "the plugin to register a session", step=0.2)
        tmux = self.tmux
        wait(lambda: "1 monitor" in tmux.screen(), READY_S, "Claude Code's idle screen", step=0.2)

    def prompt(self, text: str) -> None:
        assert self.tmux is not None
        self.tmux.type(text)

    def idle(self) -> bool:
        """No turn on screen. (Claude Code's session record has a status, but it stays at
        "shell" through turns in this version.)"""
        assert self.tmux is not None
        return "esc to interrupt" not in self.tmux.screen()

    def stop(self) -> None:
        if self.tmux is not None:
            self.tmux.kill()


EXTRA_CODEX_CONFIG = 'approval_policy = "never"\nsandbox_mode = "danger-full-access"\n'


class Codex:
    """The Codex TUI in tmux with talk's hooks (`talk install codex`), tool calls run unasked."""

    name = "codex"

    def __init__(self) -> None:
        self.tmux: Tmux | None = None
        self.rollout: Any = None  # alarms.hosts.codex.turns.TurnLog, once the first turn registered
        self.rig: Rig | None = None

    def start(self, rig: Rig, model_url: str) -> None:
        from tests.hosts.configs import codex_env, write_codex_config
        from tests.hosts.npm import host_env

        codex_home = rig.home / ".codex"
        env = host_env(rig.home, **codex_env(codex_home), TALK_HOME=str(rig.bob.home), TERM="xterm-256color")
        config = write_codex_config(codex_home, model_url)
        config.write_text(EXTRA_CODEX_CONFIG + config.read_text())
        codex = str(rig.host_bin / "codex")
        rig.bob.ok(rig.deadline, "install", "codex", "--codex-home", str(codex_home), "--codex-bin", codex,
                   "--json")
        from tests.hosts.tmux import Tmux

        self.tmux = tmux = Tmux({**env, "TALK_CODEX_BIN": codex}, "wake")
        tmux.start(rig.project, self.argv(rig, codex))
        wait(lambda: "for shortcuts" in tmux.screen(), READY_S, "the Codex TUI", step=0.2)
        self.rig = rig

    def argv(self, rig: Rig, codex: str) -> list[str]:
        return [codex]

    def first_turn_done(self) -> None:
        """Codex registers the session with a thread's first turn: find its rollout then."""
        from alarms.hosts.codex.turns import TurnLog

        rig = self.rig
        assert rig is not None
        session = wait(lambda: rig.live_session("codex"), READY_S, "a live Codex session", step=0.2)
        sid = session["sid"]
        sessions = rig.home / ".codex" / "sessions"
        found = wait(lambda: list(sessions.rglob(f"rollout-*{sid}.jsonl")), 30, "the thread's rollout")
        self.rollout = TurnLog(str(found[0]))

    def prompt(self, text: str) -> None:
        assert self.tmux is not None
        self.tmux.type(text)

    def idle(self) -> bool:
        if self.rollout is None:
            self.first_turn_done()
        now = self.rollout.look()
        return now is not None and now.busy is False

    def stop(self) -> None:
        if self.tmux is not None:
            self.tmux.kill()


class CodexRun(Codex):
    """The Codex TUI started by `talk run codex` (talk's app-server door), the hooks installed too."""

    name = "codex-run"

    def argv(self, rig: Rig, codex: str) -> list[str]:
        return [rig.bob.talk, "run", "codex"]


class Opencode:
    """`opencode serve` with talk's door daemon (`talk door opencode`) on one session."""

    name = "opencode"

    def __init__(self) -> None:
        self.procs: Any = None
        self.url = ""
        self.sid = ""
        self.rig: Rig | None = None

    def start(self, rig: Rig, model_url: str) -> None:
        from common import free_port

        from tests.hosts.configs import write_opencode_config
        from tests.hosts.npm import host_env
        from tests.hosts.procs import ProcessGroup

        self.rig = rig
        config = write_opencode_config(rig.project, model_url)
        data = json.loads(config.read_text())
        data["permission"] = {"bash": "allow"}  # the tool call runs unasked
        config.write_text(json.dumps(data, indent=2) + "\n")
        port = free_port()
        self.url = f"http://127.0.0.1:{port}"
        logs = rig.root / "opencode-logs"
        logs.mkdir()
        self.procs = ProcessGroup()
        proc = self.procs.start(
            [rig.host_bin / "opencode", "serve", "--port", str(port), "--hostname", "127.0.0.1",
             "--print-logs", "--log-level", "INFO"],
            cwd=rig.project, env=host_env(rig.home), stdout=logs / "opencode.out",
            stderr=logs / "opencode.err")

        def listening() -> bool:
            if proc.poll() is not None:
                raise BenchError(f"opencode serve exited {proc.returncode}: "
                                 f"{(logs / 'opencode.err').read_text(errors='replace')[-500:]}")
            return f"listening on {self.url}" in (logs / "opencode.out").read_text(errors="replace")

        wait(listening, READY_S, "opencode serve to listen")
        started = json.loads(rig.bob.ok(rig.deadline, "door", "opencode", "--url", self.url, "--json"))
        self.sid = str(started["session"])
        wait(lambda: any(s["sid"] == self.sid and s["alive"] for s in rig.sessions()), READY_S,
             "the alarm to register the session", step=0.2)

    def _post(self, path: str, body: Any) -> Any:
        from tests.hosts.opencode import http_json

        return http_json("POST", f"{self.url}{path}", body, timeout=30)

    def prompt(self, text: str) -> None:
        self._post(f"/session/{self.sid}/prompt_async", {"parts": [{"type": "text", "text": text}]})

    def idle(self) -> bool:
        from tests.hosts.opencode import http_json

        status = http_json("GET", f"{self.url}/session/status", timeout=30) or {}
        return bool(status.get(self.sid, {}).get("type", "idle") == "idle")

    def stop(self) -> None:
        if self.rig is not None:
            with contextlib.suppress(BenchError):
                self.rig.bob.ok(Deadline(30), "door", "stop", "opencode")
        if self.procs is not None:
            self.procs.stop()


class Pi:
    """Interactive pi in tmux with talk's extension (`talk install pi`) in its agent folder."""

    name = "pi"

    def __init__(self) -> None:
        self.tmux: Tmux | None = None

    def start(self, rig: Rig, model_url: str) -> None:
        from tests.hosts.pi import agent_dir, pi_argv, pi_setup
        from tests.hosts.tmux import Tmux

        rig.bob.ok(rig.deadline, "install", "pi", "--agent-dir", str(agent_dir(rig.home)), "--json")
        env = {**pi_setup(rig.home, model_url), "TERM": "xterm-256color"}
        self.tmux = Tmux(env, "wake")
        self.tmux.start(rig.project, pi_argv(rig.host_bin))
        wait(lambda: rig.live_session("pi"), READY_S, "the extension's door to register a session", step=0.2)

    def prompt(self, text: str) -> None:
        assert self.tmux is not None
        self.tmux.type(text)

    def idle(self) -> bool:
        from tests.hosts.pi import BUSY

        assert self.tmux is not None
        return BUSY not in self.tmux.screen()

    def stop(self) -> None:
        if self.tmux is not None:
            self.tmux.kill()


class Gemini:
    """Interactive Gemini CLI in tmux with talk's hooks (`talk install gemini`), tools run unasked
    (--yolo). Nothing wakes an idle Gemini CLI session from outside: its idle runs wait only
    `idle_wait` seconds, to show that the message did not come (it goes with the next prompt)."""

    name = "gemini"
    idle_wait = 10.0

    def __init__(self) -> None:
        self.tmux: Tmux | None = None

    def start(self, rig: Rig, model_url: str) -> None:
        from tests.hosts.gemini import gemini_env, write_gemini_settings
        from tests.hosts.npm import host_env

        settings = write_gemini_settings(rig.home)
        rig.bob.ok(rig.deadline, "install", "gemini", "--settings", str(settings), "--json")
        env = host_env(rig.home, **gemini_env(model_url), TALK_HOME=str(rig.bob.home), TERM="xterm-256color")
        from tests.hosts.tmux import Tmux

        self.tmux = tmux = Tmux(env, "wake")
        tmux.start(rig.project, [str(rig.host_bin / "gemini"), "--yolo"])
        wait(lambda: "Type your message" in tmux.screen(), READY_S, "Gemini CLI's prompt", step=0.2)

    def prompt(self, text: str) -> None:
        assert self.tmux is not None
        self.tmux.type(text)

    def idle(self) -> bool:
        assert self.tmux is not None
        return "esc to cancel" not in self.tmux.screen()

    def stop(self) -> None:
        if self.tmux is not None:
            self.tmux.kill()


class Qwen:
    """The Qwen Code TUI in tmux, wired by `talk install qwen` (the door its SessionStart hook
    starts), tool calls run unasked (`--approval-mode yolo`)."""

    name = "qwen"

    def __init__(self) -> None:
        self.tmux: Tmux | None = None

    def start(self, rig: Rig, model_url: str) -> None:
        from tests.hosts.npm import host_env
        from tests.hosts.qwen import qwen_env, write_qwen_settings

        qwen_home = rig.home / ".qwen"
        write_qwen_settings(qwen_home, model_url)
        rig.bob.ok(rig.deadline, "install", "qwen", "--qwen-home", str(qwen_home), "--qwen-bin",
                   str(rig.host_bin / "qwen"), "--json")
        from tests.hosts.tmux import Tmux

        self.tmux = Tmux(host_env(rig.home, **qwen_env(qwen_home), TERM="xterm-256color"), "wake")
        self.tmux.start(rig.project, [str(rig.host_bin / "qwen"), "--approval-mode", "yolo"])
        wait(lambda: rig.live_session("qwen"), READY_S, "the door to register a session", step=0.2)

    def prompt(self, text: str) -> None:
        from tests.hosts.qwen import type_prompt

        assert self.tmux is not None
        type_prompt(self.tmux, text)

    def idle(self) -> bool:
        from tests.hosts.qwen import busy

        assert self.tmux is not None
        return not busy(self.tmux.screen())

    def stop(self) -> None:
        if self.tmux is not None:
            self.tmux.kill()


class Copilot:
    """Interactive GitHub Copilot CLI in tmux with talk's hooks (`talk install copilot`), against
    the fake model through Copilot's custom-provider settings, every tool allowed (`--yolo`).
    Copilot has no outside door into an idle session: its idle runs measure that honestly (the
    message waits for the next prompt, so they end `not_delivered`)."""

    name = "copilot"

    def __init__(self) -> None:
        self.tmux: Tmux | None = None
        self.rig: Rig | None = None

    def start(self, rig: Rig, model_url: str) -> None:
        from tests.hosts.copilot import copilot_env
        from tests.hosts.npm import host_env

        self.rig = rig
        env = host_env(rig.home, **copilot_env(model_url), TALK_HOME=str(rig.bob.home), TERM="xterm-256color")
        rig.bob.ok(rig.deadline, "install", "copilot", "--copilot-home", str(rig.home / ".copilot"), "--json")
        from tests.hosts.tmux import Tmux

        self.tmux = tmux = Tmux(env, "wake")
        tmux.start(rig.project, [str(rig.host_bin / "copilot"), "--yolo"])
        wait(lambda: "Do you trust the files" in tmux.screen(), READY_S, "Copilot's folder trust question",
             step=0.2)
        tmux.keys("Enter")  # 1. Yes: this session only
        wait(lambda: "/ commands" in tmux.screen(), READY_S, "Copilot's prompt", step=0.2)
        # The session (and its sessionStart hook) begins with the first prompt: `idle` waits for it.

    def prompt(self, text: str) -> None:
        assert self.tmux is not None
        self.tmux.type(text)

    def idle(self) -> bool:
        """The session's event log ends a turn and no hook runs (the stop hook may start another)."""
        assert self.rig is not None
        session = self.rig.live_session("copilot")
        if session is None:
            return False
        log = self.rig.home / ".copilot" / "session-state" / session["sid"] / "events.jsonl"
        try:
            kinds = [json.loads(line)["type"] for line in log.read_text().splitlines() if line.strip()]
        except (OSError, ValueError, KeyError):
            return False
        turns = [k for k in kinds if k in ("user.message", "assistant.turn_start", "assistant.turn_end")]
        return (not turns or turns[-1] == "assistant.turn_end") and kinds.count("hook.start") == kinds.count(
            "hook.end")

    def stop(self) -> None:
        if self.tmux is not None:
            self.tmux.kill()


class CopilotRun(Copilot):
    """Copilot CLI started by `talk run copilot --allow-local-port --yolo` in tmux: its TUI+server
    mode with talk's door on the JSON-RPC port (idle sessions), and the hooks installed beside it
    (mid-turn). The project is trusted in Copilot's config, so no question waits at the start."""

    name = "copilot-run"

    def start(self, rig: Rig, model_url: str) -> None:
        from tests.hosts.copilot import copilot_env
        from tests.hosts.npm import host_env
        from tests.hosts.tmux import Tmux

        self.rig = rig
        env = host_env(rig.home, **copilot_env(model_url), TALK_HOME=str(rig.bob.home), TERM="xterm-256color")
        env["PATH"] = f"{rig.host_bin}:{env.get('PATH', '')}"
        rig.bob.ok(rig.deadline, "install", "copilot", "--copilot-home", str(rig.home / ".copilot"), "--json")
        config = rig.home / ".copilot" / "config.json"
        config.write_text(json.dumps({"trustedFolders": [str(rig.project)]}))
        self.tmux = tmux = Tmux(env, "wake")
        tmux.start(rig.project, [rig.bob.talk, "run", "copilot", "--allow-local-port", "--yolo"])
        wait(lambda: "/ commands" in tmux.screen(), READY_S, "Copilot's prompt", step=0.2)


class CopilotExt(Copilot):
    """A plain `copilot --yolo` in tmux with Copilot's extensions on (`"enabledFeatureFlags":
    {"EXTENSIONS": true}` in its settings.json), so talk's extension, which `talk install copilot`
    writes, opens the door over its own stdio; the hooks hand mail on mid-turn. The project is
    trusted in Copilot's config, so no question waits at the start."""

    name = "copilot-ext"

    def start(self, rig: Rig, model_url: str) -> None:
        from tests.hosts.copilot import copilot_env
        from tests.hosts.npm import host_env
        from tests.hosts.tmux import Tmux

        self.rig = rig
        home = rig.home / ".copilot"
        env = host_env(rig.home, **copilot_env(model_url), TALK_HOME=str(rig.bob.home), TERM="xterm-256color")
        rig.bob.ok(rig.deadline, "install", "copilot", "--copilot-home", str(home), "--json")
        (home / "config.json").write_text(json.dumps({"trustedFolders": [str(rig.project)]}))
        (home / "settings.json").write_text(json.dumps({"enabledFeatureFlags": {"EXTENSIONS": True}}))
        self.tmux = tmux = Tmux(env, "wake")
        tmux.start(rig.project, [str(rig.host_bin / "copilot"), "--yolo"])
        wait(lambda: "/ commands" in tmux.screen(), READY_S, "Copilot's prompt", step=0.2)


def make_host(name: str) -> Host:
    hosts: dict[str, Callable[[], Host]] = {"claude": Claude, "codex": Codex, "codex-run": CodexRun,
                                            "opencode": Opencode, "pi": Pi, "gemini": Gemini, "qwen": Qwen,
                                            "copilot": Copilot, "copilot-run": CopilotRun,
                                            "copilot-ext": CopilotExt}
    return hosts[name]()


# --- one host's runs -------------------------------------------------------------------------------

@dataclass
class Bench:
    rig: Rig
    host: Host
    model: Any  # tests.hosts.fake_model.FakeModel
    hold: float
    wait_s: float
    samples: list[Sample] = field(default_factory=list)

    def settle(self) -> None:
        """Wait for the session to be idle and the model to have been quiet for a moment: a
        turn's last request is not its end (hooks run, the host writes its records)."""
        def quiet() -> bool:
            requests = self.model.requests
            return (not requests or time.time() - requests[-1]["ts"] > 0.5) and self.host.idle()

        wait(quiet, IDLE_S, f"{self.host.name} to be idle", step=0.1)

    def request(self, predicate: Callable[[dict[str, Any]], bool], timeout: float,
                what: str) -> dict[str, Any] | None:
        """The first model request satisfying predicate, or None after timeout."""
        try:
            found: dict[str, Any] = self.model.wait_until(predicate, timeout, what)
        except AssertionError:
            return None
        return found

    def must(self, predicate: Callable[[dict[str, Any]], bool], timeout: float, what: str) -> None:
        if self.request(predicate, timeout, what) is None:
            raise BenchError(f"the fake model never saw {what} in {timeout:.0f} s")

    def send(self, text: str) -> float:
        sent = time.time()
        self.rig.alice.ok(self.rig.deadline, "send", "bob", text)
        return sent

    def first_run(self, model_url: str) -> Sample:
        """Mail waiting before the session starts; launch → the model's first request with it."""
        needle = f"FIRST-{uuid.uuid4().hex[:10]}"
        watch = SpoolWatch(self.rig.folder / "spool", needle)
        sample = Sample("first", self.send(f"waiting for you at start: {needle}"))
        sample.spooled = watch.wait(self.wait_s)
        watch.stop()
        sample.launched = time.time()
        self.host.start(self.rig, model_url)
        if seen := self.request(carries(needle), getattr(self.host, "idle_wait", self.wait_s), needle):
            sample.seen, sample.seen_n = seen["ts"], seen["n"]
        return sample

    def first_turn(self) -> None:
        before = len(self.model.requests)
        self.host.prompt("hello, a first turn")
        self.must(lambda r: r["n"] > before and "a first turn" in r["last_user_text"], READY_S,
                  "the first turn")
        self.settle()

    def idle_run(self) -> Sample:
        needle = f"WAKE-{uuid.uuid4().hex[:10]}"
        watch = SpoolWatch(self.rig.folder / "spool", needle)
        sample = Sample("idle", self.send(f"are you there? {needle}"))
        # A host with no idle door is only watched long enough to show that nothing came.
        if seen := self.request(carries(needle), getattr(self.host, "idle_wait", self.wait_s), needle):
            sample.seen, sample.seen_n = seen["ts"], seen["n"]
        sample.spooled = watch.wait(0)
        watch.stop()
        self.settle()
        return sample

    def midturn_run(self) -> Sample:
        nonce = uuid.uuid4().hex[:10]
        needle, done = f"MIDTURN-{nonce}", f"TOOL_DONE-{nonce}"
        flag = self.rig.root / f"tool-may-end-{nonce}"
        # printf builds the marker, so the command the model sent does not itself contain it.
        self.model.tool_command = (f"while [ ! -e {flag} ]; do sleep 0.05; done; "
                                   f"printf 'TOOL%sDONE-%s\\n' _ {nonce}")
        before = len(self.model.requests)
        self.host.prompt(f"please work on it RUN_TOOL {nonce}")
        self.must(lambda r: r["n"] > before and nonce in r["last_user_text"], READY_S,
                  "the turn that calls the tool")
        watch = SpoolWatch(self.rig.folder / "spool", needle)
        sample = Sample("midturn", self.send(f"while you work: {needle}"))
        sample.spooled = watch.wait(self.wait_s)
        watch.stop()
        time.sleep(self.hold)  # the door's chance to hand the message to the host before the boundary
        sample.tool_end = time.time()
        flag.touch()
        after = self.request(lambda r: r["n"] > before and carries(done)(r), self.wait_s, done)
        if after is not None:
            sample.boundary, sample.boundary_n = after["ts"], after["n"]
        # A host with no idle door is only watched long enough to show that nothing came.
        if seen := self.request(carries(needle), getattr(self.host, "idle_wait", self.wait_s), needle):
            sample.seen, sample.seen_n = seen["ts"], seen["n"]
        self.settle()
        return sample


@contextlib.contextmanager
def host_rig(name: str, relay: Relay, talk: str, root: Path, deadline: Deadline,
             host_bin: Path) -> Iterator[Rig]:
    """Fresh identities and a fresh HOME per host; everything started is stopped on the way out."""
    from tests.hosts.procs import reap_home

    base = root / name
    base.mkdir()
    alice = make_agent(talk, base, relay, "alice", None, deadline)
    bob = make_agent(talk, base, relay, "bob", None, deadline)
    befriend(alice, bob, deadline)
    home, project = base / "home", base / "project"
    home.mkdir()
    project.mkdir()
    bob.ok(deadline, "follow", "--peer", "alice")
    try:
        yield Rig(alice, bob, base, home, project, deadline, host_bin)
    finally:
        with contextlib.suppress(BenchError):
            bob.ok(Deadline(30), "stop")
        reap_home(home)


def run_host(name: str, relay: Relay, talk: str, root: Path, deadline: Deadline, host_bin: Path,
             args: argparse.Namespace) -> tuple[list[Sample], str | None]:
    """The host's samples, and what stopped it early (None: all runs done). A failure after
    some runs keeps what they measured."""
    from tests.hosts.fake_model import FakeModel

    host = make_host(name)
    samples: list[Sample] = []
    try:
        with host_rig(name, relay, talk, root, deadline, host_bin) as rig, FakeModel() as model:
            try:
                bench = Bench(rig, host, model, args.hold, args.wait, samples)
                samples.append(first := bench.first_run(model.url))
                lat = "-" if first.latency is None else f"{first.latency:.2f} s"
                print(f"{name} first: {lat} ({first.outcome})", file=sys.stderr)
                bench.first_turn()
                for i in range(args.runs):
                    for mode in MODES if i % 2 == 0 else MODES[::-1]:
                        sample = bench.idle_run() if mode == "idle" else bench.midturn_run()
                        samples.append(sample)
                        lat = "-" if sample.latency is None else f"{sample.latency:.2f} s"
                        print(f"{name} {mode} run {i + 1}: {lat} ({sample.outcome})", file=sys.stderr)
            finally:
                host.stop()
    except (BenchError, AssertionError, OSError, subprocess.SubprocessError) as exc:
        return samples, str(exc) or type(exc).__name__
    return samples, None


def host_programs() -> Path:
    """tests/hosts' pinned programs, installed on first use; a BenchError where that cannot be."""
    import pytest

    from tests.hosts.npm import host_bin

    try:
        return host_bin()
    except (pytest.skip.Exception, pytest.fail.Exception) as exc:
        raise BenchError(str(exc)) from None


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    def hosts(text: str) -> list[str]:
        names = [h.strip() for h in text.split(",") if h.strip()]
        bad = [h for h in names if h not in HOSTS]
        if bad or not names:
            raise argparse.ArgumentTypeError(f"choose from {', '.join(HOSTS)}")
        return names

    def positive(text: str) -> int:
        if int(text) < 1:
            raise argparse.ArgumentTypeError("must be at least 1")
        return int(text)

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--hosts", type=hosts, default=list(HOSTS), help="comma-separated (all of them)")
    parser.add_argument("--runs", type=positive, default=5, help="runs per host and mode (5)")
    parser.add_argument("--hold", type=float, default=2.0,
                        help="mid-turn: seconds the tool runs on after the message is in the spool (2)")
    parser.add_argument("--wait", type=float, default=60.0,
                        help="seconds to wait for a message to reach the model (60)")
    parser.add_argument("--timeout", type=float, default=1800.0, help="budget for the whole run (1800)")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if shutil.which("tmux") is None and set(args.hosts) - {"opencode"}:  # all the others run in tmux
        print("wake_latency: error: tmux is not on PATH (Claude Code, Codex, pi, Gemini CLI, Qwen Code and "
              "Copilot CLI run in it); "
              "install tmux or pass --hosts opencode", file=sys.stderr)
        return 1
    deadline, talk, root = begin(args.timeout)
    relay = Relay(talk, root / "relay" / "relay.db", root / "relay.log", relay_env())
    results: dict[str, dict[str, Any]] = {}
    tables: list[str] = []
    try:
        relay.start(deadline)
        host_bin = host_programs()
        for name in args.hosts:
            samples, error = run_host(name, relay, talk, root, deadline, host_bin, args)
            results[name] = summarize(samples)
            if error is not None:
                print(f"wake_latency: {name}: {error}", file=sys.stderr)
                results[name]["error"] = error
            tables.append(table(name, samples))
    except BenchError as exc:
        print(f"wake_latency: error: {exc}", file=sys.stderr)
        return 1
    finally:
        relay.stop()
        shutil.rmtree(root, ignore_errors=True)
    load = os.getloadavg()[0]
    print(f"{'host':<9} {'mode':<8} {'from':<19} {'median':>7} {'p90':>7}   (s, {args.runs} runs; outcomes)",
          file=sys.stderr)
    print("\n".join(t for t in tables if t), file=sys.stderr)
    print(f"targets: idle ≤ {TARGET_S:.0f} s; mid-turn at the boundary, ≤ {TARGET_S:.0f} s after it. "
          f"load average at the end: {load:.2f}", file=sys.stderr)
    print(json.dumps(result_line(results, args.runs, load)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
