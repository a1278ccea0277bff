"""Claude Code for the host tests: an interactive session in tmux with talk's plugin, and what
the tests read off bob while it runs."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tests.conftest import Agent
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
