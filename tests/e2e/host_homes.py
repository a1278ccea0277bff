"""A HOME for a test agent in which every host's config folder is its own, and no host program
is on PATH: what the install, doctor and upgrade tests write host configs into."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from tests.conftest import Agent


def private_home(tmp_path: Path, agent: Agent, **extra: str) -> Path:
    """`tmp_path/home` as the agent's HOME and every host's config folder; `extra` adds to its env."""
    home = tmp_path / "home"
    home.mkdir()
    agent.extra_env.update(
        HOME=str(home), CODEX_HOME=str(home / ".codex"), CLAUDE_CONFIG_DIR=str(home / ".claude"),
        QWEN_HOME=str(home / ".qwen"), GEMINI_CLI_HOME=str(home), COPILOT_HOME=str(home / ".copilot"),
        PI_CODING_AGENT_DIR=str(home / ".pi" / "agent"),
        PATH=os.pathsep.join([str(Path(sys.executable).parent), "/usr/bin", "/bin"]),
        **extra,
    )
    return home
