"""Claude Code: talk's plugin, a monitor door and hook doors (`alarms/hosts/claude/`).

Doors: the monitor (`monitor`, launched by alarms/claude_monitor.sh) writes each peer message to
the session's inbox socket (`inbox`), which starts a turn in an idle session; the hooks (`hook`)
at SessionStart, UserPromptSubmit, PostToolUse and Stop hand on what the monitor has not.
Delivered: a message the inbox socket accepted, or one a hook printed and the session's
transcript then shows (`alarms.handover` reconciles a batch with the transcript).
"""

from __future__ import annotations

from durable.faces import face

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: hooks import this package on every turn
if TYPE_CHECKING:
    from pathlib import Path

    from alarms.door import Option

__all__ = ("AUTHOR_ENV", "INSTALL_HELP", "NAME", "OPTIONS", "PROCESS_NAMES", "PROGRAM", "REACH", "TITLE",
           "UNINSTALL_HELP", "wakes")
__getattr__ = face(__name__, __all__)

NAME = "claude"
TITLE = "Claude Code"
# When a just-started session can take mail (`talk status`, `talk setup`).
REACH = (
    "from its first second: talk's plugin (its monitor) registers each session as it starts"
)
AUTHOR_ENV: tuple[str, ...] = ("CLAUDECODE",)
PROCESS_NAMES: tuple[str, ...] = ("claude",)
PROGRAM = "claude"  # on PATH where the host is installed (`talk setup`)
INSTALL_HELP = "Install the Claude Code plugin: peer mail starts a turn in each Claude Code session."
UNINSTALL_HELP = "Remove the Claude Code plugin folder `talk install claude` made."
OPTIONS: tuple[Option, ...] = (
    ("--dir", "where", "Where to put the plugin (default: TALK_HOME/claude-plugin)."),
)


def wakes(identity: Path | None) -> str:
    from alarms.hosts.claude.install import session_door
    from alarms.hosts.claude.install import wiring as plugin_wiring

    return session_door(plugin_wiring())
