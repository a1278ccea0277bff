"""Claude Code for the host tests: an interactive session in tmux with talk's plugin, and what
the tests read off bob while it runs."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tests.conftest import Agent, wait_for
from tests.hosts.configs import claude_env, seed_claude_home
from tests.hosts.fake_model import FakeModel
from tests.hosts.npm import host_env
from tests.hosts.tmux import Tmux

BASH_ALLOWED = ("--allowedTools", "Bash")  # tool calls run without asking: a turn with a tool boundary


@contextlib.contextmanager
def interactive_claude(host_bin: Path, host_home: Path, project: Path, plugin: Path, model: FakeModel,
                       *args: str, **extra_env: str) -> Iterator[Tmux]:
    """`claude --plugin-dir PLUGIN ARGS` in tmux, against the fake model; killed on leaving."""
    seed_claude_home(host_home, project)
    env = host_env(host_home, **claude_env(model.url), TERM="xterm-256color", **extra_env)
    tmux = Tmux(env, "claude").start(project, [str(host_bin / "claude"), "--plugin-dir", str(plugin), *args])
    try:
        yield tmux
    finally:
        tmux.kill()


def live_session(bob: Agent) -> dict[str, Any] | None:
    sessions = [s for s in bob.ok("session", "list", "--json").json() if s["alive"]]
    return sessions[0] if sessions else None


def spool_has(bob: Agent, needle: str) -> bool:
    root = bob.home / "bob" / "spool"
    return any(needle in p.read_text() for p in root.rglob("*.ndjson") if p.is_file())


def ready(tmux: Tmux, bob: Agent) -> dict[str, Any]:
    """bob's registration of the session, once its monitor made it and the idle UI is drawn."""
    session: dict[str, Any] = {}

    def registered() -> bool:
        session.update(live_session(bob) or {})
        return bool(session)

    wait_for(registered, 60, "the monitor to register the session")
    tmux.wait_shown("1 monitor", what="the idle UI")
    return session


def tool_waits_for(flag: Path) -> str:
    """A command for the fake model's tool call that runs until `flag` exists."""
    return f"while [ ! -e {flag} ]; do sleep 0.05; done; echo TOOL_DONE"
