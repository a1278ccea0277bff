"""pi: talk's extension, which starts a door process for each pi session, and talk's MCP server
(`alarms/hosts/pi/`).

Delivered: a message the extension saw whole in a model request (pi's `context` event); only
then does the door move the session's cursor and write the sender's receipt.
"""

from __future__ import annotations

from durable.faces import face

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: hooks import this package on every turn
if TYPE_CHECKING:
    from alarms.door import Option

__all__ = ("AUTHOR_ENV", "INSTALL_HELP", "NAME", "OPTIONS", "PROCESS_NAMES", "PROGRAM", "REACH", "TITLE",
           "UNINSTALL_HELP", "WAKES")
__getattr__ = face(__name__, __all__)

NAME = "pi"
TITLE = "pi"
# When a just-started session can take mail (`talk status`, `talk setup`).
REACH = (
    "from its first second: talk's extension starts the door as the session starts"
)
AUTHOR_ENV: tuple[str, ...] = ("PI_CODING_AGENT",)
PROCESS_NAMES: tuple[str, ...] = ("pi",)
PROGRAM = "pi"  # on PATH where the host is installed (`talk setup`)
INSTALL_HELP = "Install talk's pi extension: peer mail starts or joins a turn in each pi session."
UNINSTALL_HELP = "Remove talk's pi extension and its MCP server entry."
WAKES = "talk's pi extension (a turn per message, or joined to the running one)"  # for `talk status`
OPTIONS: tuple[Option, ...] = (
    ("--agent-dir", "where", "pi's agent folder (default: $PI_CODING_AGENT_DIR, else ~/.pi/agent)."),
)
