"""Who wrote what this command sends: a person at a terminal, or an agent.

A person types into a terminal: stdin and stdout are both TTYs. An agent's tool call usually
has neither, but some hosts run tools in a pseudo-terminal, so the variables each host sets
in its tools' environment count first: with one of them set, the command runs inside an
agent's session whatever its terminal. The MCP server speaks only for an agent and does not
ask. This feeds the loop guard (follower.groups.loop_guard), a brake on agents that keep answering
each other, not a lock against an agent that wants to pass for a person: such an agent can
run any command its person can.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping

from follower.groups.loop_guard import Author

__all__ = ["AGENT_HOST_ENV", "agent_host", "author", "written_by"]

# The variable each host sets for the commands its agent runs (read from the hosts' own
# programs); AI_AGENT is the name more and more hosts share. Copilot CLI sets none we know of.
AGENT_HOST_ENV = (
    ("Claude Code", "CLAUDECODE"),
    ("Codex", "CODEX_THREAD_ID"),
    ("Codex", "CODEX_SANDBOX"),
    ("opencode", "OPENCODE"),
    ("Gemini CLI", "GEMINI_CLI"),
    ("Qwen Code", "QWEN_CODE"),
    ("pi", "PI_CODING_AGENT"),
    ("an agent", "AI_AGENT"),
)


def agent_host(env: Mapping[str, str]) -> str | None:
    """The agent host whose session this environment belongs to, or None."""
    for host, name in AGENT_HOST_ENV:
        if env.get(name, "").strip().lower() not in ("", "0", "false"):
            return host
    return None


def author(env: Mapping[str, str], on_terminal: bool) -> Author:
    """A person only on a terminal and outside every agent host's session."""
    return Author.PERSON if on_terminal and agent_host(env) is None else Author.AGENT


def written_by() -> Author:
    """`author` for this process: its environment, and whether stdin and stdout are TTYs."""
    return author(os.environ, sys.stdin.isatty() and sys.stdout.isatty())
