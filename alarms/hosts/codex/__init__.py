"""Codex: a hook door for SessionStart, UserPromptSubmit, PostToolUse and Stop, and a waker door
that starts a turn in an idle TUI session (`alarms/hosts/codex/`).

Delivered: a batch the hook printed and Codex's rollout file then shows (`alarms.handover`); a
payload without a rollout (an ephemeral thread) counts the print as the hand-over.
"""

from __future__ import annotations

from durable.faces import face

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: hooks import this package on every turn
if TYPE_CHECKING:
    from alarms.door import Option

__all__ = ("AUTHOR_ENV", "INSTALL_HELP", "NAME", "OPTIONS", "PROCESS_NAMES", "PROGRAM", "REACH", "TITLE",
           "UNINSTALL_HELP", "WAKES", "hook")
__getattr__ = face(__name__, __all__)

NAME = "codex"
TITLE = "Codex"
# When a just-started session can take mail (`talk status`, `talk setup`).
REACH = (
    "a plain `codex` TUI from its first prompt: its hooks run then, and mail already waiting goes"
    " with that prompt"
)
AUTHOR_ENV: tuple[str, ...] = ("CODEX_THREAD_ID", "CODEX_SANDBOX")
PROCESS_NAMES: tuple[str, ...] = ("codex",)
PROGRAM = "codex"  # on PATH where the host is installed (`talk setup`)
INSTALL_HELP = (
    "Install talk's Codex hooks (mail at session start, with each prompt, after each tool call, "
    "and at the end of a turn)."
)
UNINSTALL_HELP = "Take talk's hooks out of Codex's hooks.json, leaving the rest as it was."
WAKES = "Codex hooks (SessionStart, UserPromptSubmit, PostToolUse, Stop)"  # for `talk status`
OPTIONS: tuple[Option, ...] = (
    ("--codex-home", "where", "Codex's home folder (default: CODEX_HOME or ~/.codex)."),
    ("--codex-bin", "program", "The codex program, to record trust (default: on PATH)."),
)
