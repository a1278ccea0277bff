"""Is there new mail for this session? The answer most agent turns get, from the standard library.

A hook runs on every turn, and most turns find nothing new: `nothing_new` says so with a stat,
one small read and a touch, without the cursor's machinery (`spool_writer.cursor` and what it
imports cost a hook ~20 ms). Any doubt answers False, and the caller then takes the full way.

The spool's file names are spelled here, once: `layout` and `cursor` take them from this module,
so the fast answer and the full one always look at the same files.
"""

from __future__ import annotations

import json
import os

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: importing typing costs a hook ~3 ms
if TYPE_CHECKING:
    from pathlib import Path
    from typing import Any

__all__ = ["CURSOR_SUFFIX", "CURSOR_VERSION", "INDEX_FILE", "LOCK_SUFFIX", "PENDING_SUFFIX", "SESSIONS",
           "SPOOL", "SPOOL_SUFFIX", "caught_up", "nothing_new", "safe_sid"]

SPOOL = "spool"  # the spool's folder in an identity's folder
SESSIONS = "sessions"  # the sessions' own spools, in the spool's folder
INDEX_FILE = "delivered.log"  # the delivered ids, in the spool's folder
SPOOL_SUFFIX = ".ndjson"  # <sid>.ndjson: a session's spool
CURSOR_SUFFIX = ".cursor"  # <sid>.cursor: its read position (`spool_writer.cursor`)
LOCK_SUFFIX = ".lock"  # <sid>.cursor.lock: the cursor's lock, touched on every read
PENDING_SUFFIX = ".pending.json"  # <sid>.pending.json: a hand-over not yet confirmed (`alarms.pending`)
CURSOR_VERSION = 1  # the cursor state file's format


def safe_sid(sid: str) -> bool:
    """A session id that can name a file: 1-128 ASCII letters, digits, '.', '_' or '-', not
    starting with '.' (`spool_writer.layout.check_sid` explains a refusal)."""
    return 0 < len(sid) <= 128 and sid[0] != "." and all(c.isascii() and (c.isalnum() or c in "._-")
                                                          for c in sid)


def caught_up(cursor: Any, inode: int, size: int) -> bool:
    """Whether a saved cursor (the cursor's state file, parsed) has read the whole spool file.

    Same file (inode) and offset at its end: nothing new, and no line half-written (the
    offset counts complete lines only). The writer only appends and rotates (a new inode),
    so this never hides mail; anything else goes the full way through the cursor.
    """
    return (isinstance(cursor, dict) and cursor.get("v") == CURSOR_VERSION
            and cursor.get("inode") == inode and cursor.get("offset") == size)


def nothing_new(folder: str | Path, sid: str) -> bool:
    """Whether session `sid` of the identity in `folder` has read all its mail.

    Marks the read as `CursorReader.take` does (the lock file's mtime), so `talk gc` still sees
    an idle session as alive. Any doubt answers False, and so does a pending hand-over (one
    stat): only the full way reconciles it with the host's transcript.
    """
    if not safe_sid(sid):
        return False
    sessions = os.path.join(folder, SPOOL, SESSIONS)
    if os.path.exists(os.path.join(sessions, sid + PENDING_SUFFIX)):
        return False
    try:
        st = os.stat(os.path.join(sessions, sid + SPOOL_SUFFIX))
        with open(os.path.join(sessions, sid + CURSOR_SUFFIX), "rb") as f:
            cursor = json.loads(f.read())
        if not caught_up(cursor, st.st_ino, st.st_size):
            return False
        os.utime(os.path.join(sessions, sid + CURSOR_SUFFIX + LOCK_SUFFIX))
    except (OSError, ValueError):
        return False
    return True
