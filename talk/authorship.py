"""Who wrote what this command sends: a person at a terminal, or an agent.

A person types into a terminal: stdin and stdout are both TTYs. An agent's tool call usually
has neither, but some hosts run tools in a pseudo-terminal, so the variables each host sets
in its tools' environment (each host's AUTHOR_ENV, `alarms.registry.agent_host`) count first:
with one of them set, the command runs inside an agent's session whatever its terminal. The MCP
server speaks only for an agent and does not ask. This feeds the loop guard
(follower.groups.loop_guard), a brake on agents that keep answering each other, not a lock against an
agent that wants to pass for a person: such an agent can run any command its person can.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping

from alarms.registry import agent_host
from follower.groups.loop_guard import Author

__all__ = ["author", "written_by"]


def author(env: Mapping[str, str], on_terminal: bool) -> Author:
    """A person only on a terminal and outside every agent host's session."""
    return Author.PERSON if on_terminal and agent_host(env) is None else Author.AGENT


def written_by() -> Author:
    """`author` for this process: its environment, and whether stdin and stdout are TTYs."""
    return author(os.environ, sys.stdin.isatty() and sys.stdout.isatty())
