"""GitHub Copilot CLI: a hook door for sessionStart, userPromptSubmitted, postToolUse and agentStop,
and talk's MCP server (`alarms/hosts/copilot/`). Copilot CLI sets no variable of its own in its tools'
environment that we know of.

Delivered: a batch the hook printed and the session's events file then shows (`alarms.handover`).
"""

from __future__ import annotations

from durable.faces import face

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: hooks import this package on every turn
if TYPE_CHECKING:
    from alarms.door import Option

__all__ = ("AUTHOR_ENV", "INSTALL_HELP", "NAME", "OPTIONS", "PROCESS_NAMES", "PROGRAM", "REACH", "TITLE",
           "UNINSTALL_HELP", "WAKES")
__getattr__ = face(__name__, __all__)

NAME = "copilot"
TITLE = "Copilot CLI"
# When a just-started session can take mail (`talk status`, `talk setup`).
REACH = (
    "a plain `copilot` session from its first prompt, when its hooks first run; mail waiting goes"
    " with that prompt"
)
AUTHOR_ENV: tuple[str, ...] = ()
PROCESS_NAMES: tuple[str, ...] = ("copilot",)
PROGRAM = "copilot"  # on PATH where the host is installed (`talk setup`)
INSTALL_HELP = (
    "Install talk's Copilot CLI hooks (mail with each prompt, after each tool call, and at the "
    "end of a turn) and its MCP server."
)
UNINSTALL_HELP = "Take talk's hooks and MCP server out of Copilot CLI's config, leaving the rest as it was."
WAKES = "Copilot CLI hooks (sessionStart, userPromptSubmitted, postToolUse, agentStop)"  # for `talk status`
OPTIONS: tuple[Option, ...] = (
    ("--copilot-home", "where", "Copilot CLI's home folder (default: COPILOT_HOME or ~/.copilot)."),
)
