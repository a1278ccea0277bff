"""GitHub Copilot CLI: a hook door for sessionStart, userPromptSubmitted, postToolUse and agentStop,
talk's MCP server, and talk's extension (`alarms/hosts/copilot/`), whose door (`ext_door`) sends
mail into the idle session as a prompt over the extension's own stdio, once Copilot's extensions
are on; and `talk run copilot`, which starts Copilot in its TUI+server mode with a door
(`ui_door`) that does the same over the server's port. In a turn the hooks hand mail on. Copilot
CLI sets no variable of its own in its tools' environment that we know of.

Delivered: a batch the hook printed, or a prompt Copilot accepted, and the session's events file
then shows (`alarms.handover`).
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
    "from its first second where Copilot's extensions are on (\"enabledFeatureFlags\": {\"EXTENSIONS\": "
    "true} in its settings.json, or --experimental: talk's extension opens the door), or when started "
    "with `talk run copilot --allow-local-port`; otherwise only from its first prompt (its hooks run "
    "then, and mail waiting goes with it)"
)
AUTHOR_ENV: tuple[str, ...] = ()
PROCESS_NAMES: tuple[str, ...] = ("copilot",)
PROGRAM = "copilot"  # on PATH where the host is installed (`talk setup`)
INSTALL_HELP = (
    "Install talk's Copilot CLI hooks (mail with each prompt, after each tool call, and at the "
    "end of a turn), its MCP server, and its extension (mail into an idle session, where Copilot's "
    "extensions are on)."
)
UNINSTALL_HELP = ("Take talk's hooks, MCP server and extension out of Copilot CLI's config, leaving the rest "
                  "as it was.")
# for `talk status`
WAKES = ("Copilot CLI hooks (sessionStart, userPromptSubmitted, postToolUse, agentStop); talk's "
         "extension wakes an idle session where Copilot's extensions are on (enabledFeatureFlags."
         "EXTENSIONS), as does `talk run copilot`")
OPTIONS: tuple[Option, ...] = (
    ("--copilot-home", "where", "Copilot CLI's home folder (default: COPILOT_HOME or ~/.copilot)."),
)
RUN_HELP = (
    "Start Copilot CLI in this terminal with talk's door open: peer mail starts a turn when the "
    "session is idle (in a turn, talk's hooks hand it on after each tool call). Copilot's server "
    "port has no authentication, so this needs --allow-local-port. The private door needs no "
    "port: talk's extension (`talk install copilot`) opens it in a plain `copilot` once Copilot's "
    "extensions are on (enabledFeatureFlags.EXTENSIONS set to true in ~/.copilot/settings.json)."
)
RUN_OPTIONS: tuple[DoorOption, ...] = (
    ("--allow-local-port", "switch", "",
     "Accept that any local user can reach Copilot's unauthenticated server port while it runs."),
)


def run_session(folder: Path, args: Sequence[str], env: Mapping[str, str], given: Mapping[str, Any]) -> int:
    from alarms.hosts.copilot.launch import run

    return run(folder, args, env, given)
