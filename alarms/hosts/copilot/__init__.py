"""GitHub Copilot CLI: a hook door for sessionStart, userPromptSubmitted, postToolUse and agentStop,
and talk's MCP server (`alarms/hosts/copilot/`); and `talk run copilot`, which starts Copilot in its
TUI+server mode with a door (`ui_door`) that sends mail into the idle session as a prompt (in a
turn the hooks hand it on). Copilot CLI sets no variable of its own in its tools' environment
that we know of.

Delivered: a batch the hook printed, or a prompt Copilot's server accepted, and the session's
events file then shows (`alarms.handover`).
"""

from __future__ import annotations

from durable.faces import face

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: hooks import this package on every turn
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from pathlib import Path
    from typing import Any

    from alarms.door import DoorOption, Option

__all__ = ("AUTHOR_ENV", "INSTALL_HELP", "NAME", "OPTIONS", "PROCESS_NAMES", "PROGRAM", "REACH", "RUN_HELP",
           "RUN_OPTIONS", "TITLE", "UNINSTALL_HELP", "WAKES", "run_session")
__getattr__ = face(__name__, __all__)

NAME = "copilot"
TITLE = "Copilot CLI"
# When a just-started session can take mail (`talk status`, `talk setup`).
REACH = (
    "from its first second when started with `talk run copilot --allow-local-port`; a plain "
    "`copilot` session only from its first prompt (its hooks run then, and mail waiting goes with it)"
)
AUTHOR_ENV: tuple[str, ...] = ()
PROCESS_NAMES: tuple[str, ...] = ("copilot",)
PROGRAM = "copilot"  # on PATH where the host is installed (`talk setup`)
INSTALL_HELP = (
    "Install talk's Copilot CLI hooks (mail with each prompt, after each tool call, and at the "
    "end of a turn) and its MCP server."
)
UNINSTALL_HELP = "Take talk's hooks and MCP server out of Copilot CLI's config, leaving the rest as it was."
# for `talk status`
WAKES = ("Copilot CLI hooks (sessionStart, userPromptSubmitted, postToolUse, agentStop); "
         "`talk run copilot` adds a door that wakes an idle session")
OPTIONS: tuple[Option, ...] = (
    ("--copilot-home", "where", "Copilot CLI's home folder (default: COPILOT_HOME or ~/.copilot)."),
)
RUN_HELP = (
    "Start Copilot CLI in this terminal with talk's door open: peer mail starts a turn when the "
    "session is idle (in a turn, talk's hooks hand it on after each tool call). Copilot's server "
    "port has no authentication, so this needs --allow-local-port."
)
RUN_OPTIONS: tuple[DoorOption, ...] = (
    ("--allow-local-port", "switch", "",
     "Accept that any local user can reach Copilot's unauthenticated server port while it runs."),
)


def run_session(folder: Path, args: Sequence[str], env: Mapping[str, str], given: Mapping[str, Any]) -> int:
    from alarms.hosts.copilot.launch import run

    return run(folder, args, env, given)
