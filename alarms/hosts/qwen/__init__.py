"""Qwen Code: a daemon door writing to Qwen's inbox socket as a peer (never as the user), started by
a SessionStart hook; and talk's MCP server (`alarms/hosts/qwen/`).

Delivered: a message Qwen's receipt says it delivered to the session; "held" waits for the
user's review in /peers, "dropped" is sent again or given up as Qwen says.
"""

from __future__ import annotations

from durable.faces import face

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: hooks import this package on every turn
if TYPE_CHECKING:
    from collections.abc import Mapping
    from pathlib import Path
    from typing import Any

    from alarms.door import Done, DoorOption, Option

__all__ = ("AUTHOR_ENV", "INSTALL_HELP", "NAME", "OPTIONS", "PROCESS_NAMES", "PROGRAM", "REACH", "START_HELP",
           "START_OPTIONS", "STOP_HELP", "STOP_OPTIONS", "TITLE", "UNINSTALL_HELP", "WAKES",
           "daemon", "door_status", "registry", "render_status", "start_door", "status",
           "stop_door")
__getattr__ = face(__name__, __all__)

NAME = "qwen"
TITLE = "Qwen Code"
# When a just-started session can take mail (`talk status`, `talk setup`).
REACH = (
    "from its first second: the SessionStart hook starts talk's door as the session starts"
)
AUTHOR_ENV: tuple[str, ...] = ("QWEN_CODE",)
PROCESS_NAMES: tuple[str, ...] = ("qwen",)
PROGRAM = "qwen"  # on PATH where the host is installed (`talk setup`)
INSTALL_HELP = (
    "Install talk into Qwen Code: the door's SessionStart hook, the MCP server, and peer "
    "messages accepted where Qwen's policy for them is unset."
)
UNINSTALL_HELP = (
    "Take talk out of Qwen Code: the hook, the MCP server, the policy install set, an old "
    "controller grant."
)
WAKES = "the Qwen door (Qwen's inbox socket, as a peer: never as the user)"  # for `talk status`
OPTIONS: tuple[Option, ...] = (
    ("--qwen-home", "where", "Qwen Code's home (default: QWEN_HOME or ~/.qwen)."),
    ("--qwen-bin", "program", "The qwen program (default: on PATH)."),
)
START_HELP = "Start the Qwen Code door now (its SessionStart hook, from `talk install qwen`, also does)."
STOP_HELP = "Stop the Qwen Code door (mail stays in its outbox and the spool)."
START_OPTIONS: tuple[DoorOption, ...] = (
    ("--qwen-home", "path", "", "Qwen Code's home (default: the one `talk install qwen` used)."),
)
STOP_OPTIONS: tuple[DoorOption, ...] = ()


def door_status(identity: Path) -> tuple[str, Any] | None:
    from alarms.hosts.qwen.status import door_status

    return "qwen_door", door_status(identity)


def render_status(report: Mapping[str, Any]) -> list[str]:
    from alarms.hosts.qwen.status import render_door

    value = report.get("qwen_door")
    return [render_door(value)] if value else []


def start_door(folder: Path, given: Mapping[str, Any]) -> Done:
    from alarms.hosts.qwen.control import start

    return start(folder, given)


def stop_door(folder: Path, given: Mapping[str, Any]) -> Done:
    from alarms.hosts.qwen.control import stop

    return stop(folder, given)
