"""opencode: a daemon door per opencode session, posting mail to the server as a prompt
(`alarms/hosts/opencode/`; started by `talk door opencode`).

Delivered: a prompt the server stored and the session then took (`verdict`); one the server
lost or left stranded is posted again.
"""

from __future__ import annotations

from durable.faces import face

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: hooks import this package on every turn
if TYPE_CHECKING:
    from collections.abc import Mapping
    from pathlib import Path
    from typing import Any

    from alarms.door import Done, DoorOption, Option
    from alarms.wiring import Wiring

__all__ = ("AUTHOR_ENV", "INSTALL_HELP", "NAME", "OPTIONS", "PROCESS_NAMES", "PROGRAM", "REACH", "START_HELP",
           "START_OPTIONS", "STOP_HELP", "STOP_OPTIONS", "TITLE", "UNINSTALL_HELP", "WAKES", "api",
           "daemon", "door_status", "install", "render_status", "start_door", "stop_door",
           "wiring")
__getattr__ = face(__name__, __all__)

NAME = "opencode"
TITLE = "opencode"
# When a just-started session can take mail (`talk status`, `talk setup`).
REACH = (
    "once `talk door opencode --url URL` is attached to `opencode serve`: from then on, idle or "
    "busy"
)
AUTHOR_ENV: tuple[str, ...] = ("OPENCODE",)
PROCESS_NAMES: tuple[str, ...] = ("opencode",)
PROGRAM = "opencode"  # on PATH where the host is installed (`talk setup`)
INSTALL_HELP = (
    "Say how opencode gets mail: `talk door opencode --url URL` starts a door per session "
    "(nothing to install)."
)
UNINSTALL_HELP = "Stop every opencode door of this identity (their mail stays)."
WAKES = "talk door opencode (prompt_async)"  # for `talk status`
OPTIONS: tuple[Option, ...] = ()
START_HELP = "Start the opencode door: new mail becomes a turn of an opencode session (prompt_async)."
STOP_HELP = "Stop the opencode door of one session (default: every opencode door of this identity)."

_SESSION: DoorOption = ("--session", "text", "ID", "opencode session id (default: create one titled 'talk').")
START_OPTIONS: tuple[DoorOption, ...] = (
    ("--url", "required", "URL", "The opencode server, e.g. http://127.0.0.1:4096."),
    _SESSION,
    ("--pid", "number", "PID", "Pid the session lives with (default: the opencode server's)."),
    ("--foreground", "switch", "", "Run in this terminal instead of detaching."),
)
STOP_OPTIONS: tuple[DoorOption, ...] = (_SESSION,)


def wiring(identity: Path | None) -> Wiring:
    from alarms.hosts.opencode.install import wiring as judge

    return judge(identity)


def door_status(identity: Path) -> tuple[str, Any] | None:
    from alarms.hosts.opencode.status import session_doors

    return "opencode_doors", session_doors(identity)


def render_status(report: Mapping[str, Any]) -> list[str]:
    from alarms.hosts.opencode.status import render_door

    return [render_door(row) for row in report.get("opencode_doors", [])]


def start_door(folder: Path, given: Mapping[str, Any]) -> Done | int:
    from alarms.hosts.opencode.control import start

    return start(folder, given)


def stop_door(folder: Path, given: Mapping[str, Any]) -> Done:
    from alarms.hosts.opencode.control import stop

    return stop(folder, given)
