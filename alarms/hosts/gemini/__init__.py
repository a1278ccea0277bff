"""Gemini CLI: a hook door for SessionStart, BeforeAgent, AfterTool and AfterAgent, and talk's MCP
server (`alarms/hosts/gemini/`).

Delivered: a batch the hook printed whole (BeforeAgent, AfterAgent; AfterTool only what fits
under Gemini CLI's cut of a tool's result) and the session's transcript then shows.
"""

from __future__ import annotations

from durable.faces import face

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: hooks import this package on every turn
if TYPE_CHECKING:
    from alarms.door import Option

__all__ = ("AUTHOR_ENV", "INSTALL_HELP", "NAME", "OPTIONS", "PROCESS_NAMES", "PROGRAM", "REACH", "TITLE",
           "UNINSTALL_HELP", "WAKES", "hook")
__getattr__ = face(__name__, __all__)

NAME = "gemini"
TITLE = "Gemini CLI"
# When a just-started session can take mail (`talk status`, `talk setup`).
REACH = (
    "from its first prompt, and never while it waits for its user: no outside door can start a "
    "turn, so mail goes with the next prompt"
)
AUTHOR_ENV: tuple[str, ...] = ("GEMINI_CLI",)
PROCESS_NAMES: tuple[str, ...] = ("gemini", "gemini.js")
PROGRAM = "gemini"  # on PATH where the host is installed (`talk setup`)
INSTALL_HELP = (
    "Install talk's Gemini CLI hooks (mail with each prompt, after each tool call, and at the "
    "end of a turn) and its MCP server."
)
UNINSTALL_HELP = (
    "Remove talk's Gemini CLI hooks and MCP server, leaving the rest of settings.json as it "
    "was."
)
WAKES = "Gemini CLI hooks (BeforeAgent, AfterTool, AfterAgent)"  # for `talk status`
OPTIONS: tuple[Option, ...] = (
    ("--settings", "where",
     "Gemini CLI's settings.json (default: ~/.gemini/settings.json, under GEMINI_CLI_HOME if set)."),
)
