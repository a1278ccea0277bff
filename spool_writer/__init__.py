"""The spool: where received mail waits for the agent sessions on this machine.

The follower hands each opened message to `Spool.deliver`, which appends one NDJSON line to
the spool of every live registered session (or to the inbox when none is live), durably and
at most once per id. Every door reads its session's spool with a `CursorReader`. This package
imports only the standard library and the leaf package `durable` (errors, private files,
locks, NDJSON appends): hooks import it on every agent turn.

    record     SpoolRecord: the fields of one spool line, who writes each, what a whole one is
    layout     where the files are, their modes, the folder lock
    lines      whole-line appends, rotation, reading complete lines back
    index      the delivered ids, and deliveries a crash cut short
    spool      Spool: deliver, knows; utc_stamp, the spool's way of writing a time
    registry   sessions.json: who gets a copy of new mail
    process    is a host process still the one that registered?
    transfer   moving unread mail between spools (inside only)
    sessions   register, unregister, list_sessions, gc
    cursor     the pure cursor logic and CursorReader
    peek       the files' names, and "nothing new for this session?" from the standard library
    scan       SpoolScan: every message in the spool, for a person's eyes, no cursor moved
    handed     the hand-over log: which messages a door handed to a session, and how far
    doorbell   the named pipe by which a door tells the follower it handed mail over

The face (`__all__`, see `durable.faces`): other packages import these modules by name (`from
spool_writer.cursor import CursorReader`), and from each only the names in its `__all__`. This
file loads none of them, so a hook that needs the cursor loads only that.
"""

from __future__ import annotations

from durable.faces import face

__all__ = ("cursor", "doorbell", "handed", "index", "layout", "lines", "peek", "process", "record",
           "registry", "scan", "sessions", "spool")
__getattr__ = face(__name__, __all__)
