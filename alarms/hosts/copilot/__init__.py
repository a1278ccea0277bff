"""GitHub Copilot CLI: a hook door for sessionStart, userPromptSubmitted, postToolUse and agentStop,
and talk's MCP server (`alarms/hosts/copilot/`). Copilot CLI sets no variable of its own in its tools'
environment that we know of.

Delivered: a batch the hook printed and the session's events file then shows (`alarms.handover`).

This module is the host's face (`alarms.door.Host`): constants, and functions that import the
rest when called. It imports nothing at the top but its face's loader (`durable.faces`, which
needs only `sys`), because hooks load it on every turn; `__all__` lists the modules others import.
"""

from __future__ import annotations

from durable.faces import face

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: hooks import this package on every turn
if TYPE_CHECKING:
    from collections.abc import Mapping
    from pathlib import Path
    from typing import Any

    from alarms.door import Done, Option, Request
    from alarms.wiring import Wiring

__all__ = (
    "AUTHOR_ENV",
    "INSTALL_HELP",
    "NAME",
    "OPTIONS",
    "PROCESS_NAMES",
    "TITLE",
    "UNINSTALL_HELP",
    "door_status",
    "install_doors",
    "paths",
    "render_status",
    "uninstall_doors",
    "wakes",
    "wiring",
)
__getattr__ = face(__name__, __all__)

NAME = "copilot"
TITLE = "Copilot CLI"
AUTHOR_ENV: tuple[str, ...] = ()
PROCESS_NAMES: tuple[str, ...] = ("copilot",)
INSTALL_HELP = (
    "Install talk's Copilot CLI hooks (mail with each prompt, after each tool call, and at the "
    "end of a turn) and its MCP server."
)
UNINSTALL_HELP = "Take talk's hooks and MCP server out of Copilot CLI's config, leaving the rest as it was."
OPTIONS: tuple[Option, ...] = (
    ("--copilot-home", "where", "Copilot CLI's home folder (default: COPILOT_HOME or ~/.copilot)."),
)


def install_doors(request: Request) -> Done:
    from alarms.hosts.copilot.install import install as run

    return run(request)


def uninstall_doors(request: Request) -> Done:
    from alarms.hosts.copilot.install import uninstall as run

    return run(request)


def wiring(identity: Path | None) -> Wiring:
    from alarms.hosts.copilot.install import wiring as judge

    return judge()


def paths() -> list[Path]:
    from alarms.hosts.copilot.install import paths as written

    return written()


def wakes(identity: Path | None) -> str:
    return "Copilot CLI hooks (sessionStart, userPromptSubmitted, postToolUse, agentStop)"


def door_status(identity: Path) -> tuple[str, Any] | None:
    return None


def render_status(report: Mapping[str, Any]) -> list[str]:
    return []
