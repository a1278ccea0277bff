"""The spool: where received mail waits for the agent sessions on this machine.

The follower hands each opened message to `Spool.deliver`, which appends one NDJSON line to
the spool of every live registered session (or to the inbox when none is live), durably and
at most once per id. Every alarm reads its session's spool with a `CursorReader`. This package
imports only the standard library and the leaf package `durable` (errors, private files,
locks, NDJSON appends): hooks import it on every agent turn.

    layout     where the files are, their modes, the folder lock
    lines      whole-line appends, rotation, reading complete lines back
    index      the delivered ids, and deliveries a crash cut short
    spool      Spool: deliver, knows
    registry   sessions.json and the Host enum
    process    is a host process still the one that registered?
    handover   moving unread mail between spools
    sessions   register, unregister, list_sessions, gc
    cursor     the pure cursor logic and CursorReader
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

# The delivered-ids file's name, here so a reader can look for it before loading any module.
INDEX_FILE = "delivered.log"

if TYPE_CHECKING:
    from spool_writer.cursor import CursorReader, CursorState
    from spool_writer.layout import SpoolLayout, check_sid
    from spool_writer.registry import Host
    from spool_writer.sessions import Registration, SessionInfo, gc, list_sessions, register, unregister
    from spool_writer.spool import Spool

_HOME = {
    "CursorReader": "cursor", "CursorState": "cursor", "SpoolLayout": "layout", "check_sid": "layout",
    "Host": "registry", "Registration": "sessions", "SessionInfo": "sessions", "gc": "sessions",
    "list_sessions": "sessions", "register": "sessions", "unregister": "sessions", "Spool": "spool",
}
__all__ = [
    "INDEX_FILE",
    "CursorReader",
    "CursorState",
    "Host",
    "Registration",
    "SessionInfo",
    "Spool",
    "SpoolLayout",
    "check_sid",
    "gc",
    "list_sessions",
    "register",
    "unregister",
]


def __getattr__(name: str) -> Any:
    """Import a name's module on first use: an alarm that needs only the cursor loads only that."""
    if name not in _HOME:
        raise AttributeError(f"module 'spool_writer' has no attribute {name!r}")
    return getattr(import_module(f"spool_writer.{_HOME[name]}"), name)
