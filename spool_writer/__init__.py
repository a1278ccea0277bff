"""The spool: where received mail waits for the agent sessions on this machine.

The follower hands each opened message to `Spool.deliver`, which appends one NDJSON line to
the spool of every live registered session (or to the inbox when none is live), durably and
at most once per id. Every alarm reads its session's spool with a `CursorReader`. This package
imports only the standard library and the leaf package `durable` (errors, private files,
locks, NDJSON appends): hooks import it on every agent turn.

    record     SpoolRecord: the fields of one spool line, who writes each, what a whole one is
    layout     where the files are, their modes, the folder lock
    lines      whole-line appends, rotation, reading complete lines back
    index      the delivered ids, and deliveries a crash cut short
    spool      Spool: deliver, knows; utc_stamp, the spool's way of writing a time
    registry   sessions.json: who gets a copy of new mail
    process    is a host process still the one that registered?
    handover   moving unread mail between spools
    sessions   register, unregister, list_sessions, gc
    cursor     the pure cursor logic and CursorReader

Others import these modules by name (`from spool_writer.cursor import CursorReader`): this file
loads none of them, so a hook that needs the cursor loads only that.
"""

from __future__ import annotations

# The delivered-ids file's name, here so a reader can look for it before loading any module.
INDEX_FILE = "delivered.log"

__all__ = ["INDEX_FILE"]
