"""Codex: a hook door for SessionStart, UserPromptSubmit, PostToolUse and Stop, a waker door
that starts a turn in an idle TUI session, and the door of `talk run codex`, a second client of
the session's app-server (`alarms/hosts/codex/`).

Delivered: a batch the hook printed and Codex's rollout file then shows (`alarms.handover`); a
payload without a rollout (an ephemeral thread) counts the print as the hand-over. Under `talk
run codex`: a batch Codex accepted as a turn's input and its rollout then shows.
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
           "RUN_OPTIONS", "TITLE", "UNINSTALL_HELP", "WAKES", "hook", "run_session")
__getattr__ = face(__name__, __all__)

NAME = "codex"
TITLE = "Codex"
# When a just-started session can take mail (`talk status`, `talk setup`).
REACH = (
    "from its first second when started with `talk run codex`; a plain `codex` TUI only from its "
    "first prompt (its hooks run then, and mail already waiting goes with that prompt)"
)
AUTHOR_ENV: tuple[str, ...] = ("CODEX_THREAD_ID", "CODEX_SANDBOX")
PROCESS_NAMES: tuple[str, ...] = ("codex",)
PROGRAM = "codex"  # on PATH where the host is installed (`talk setup`)
INSTALL_HELP = (
    "Install talk's Codex hooks (mail at session start, with each prompt, after each tool call, "
    "and at the end of a turn)."
)
UNINSTALL_HELP = "Take talk's hooks out of Codex's hooks.json, leaving the rest as it was."
WAKES = ("Codex hooks (SessionStart, UserPromptSubmit, PostToolUse, Stop); under `talk run codex`, "
         "its app-server door")  # for `talk status`
OPTIONS: tuple[Option, ...] = (
    ("--codex-home", "where", "Codex's home folder (default: CODEX_HOME or ~/.codex)."),
    ("--codex-bin", "program", "The codex program, to record trust (default: on PATH)."),
)
RUN_HELP = (
    "Start the Codex TUI with talk's door open from its first second: mail reaches an idle session "
    "as a turn of its own, and a busy one with its next step, as user-role input. Runs `codex "
    "app-server` on a private socket and `codex --remote` on it; other arguments go to codex. "
    "The codex program: PATH, or TALK_CODEX_BIN."
)
RUN_OPTIONS: tuple[DoorOption, ...] = ()


def run_session(folder: Path, args: Sequence[str], env: Mapping[str, str], given: Mapping[str, Any]) -> int:
    """`talk run codex` (`alarms.door.LaunchHost`): see `alarms.hosts.codex.launch`. It has no
    options of its own (`given` is empty): the socket is private, so nothing needs opting into."""
    from alarms.hosts.codex.launch import run

    return run(folder, args, env)
