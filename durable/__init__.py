"""What every part of talk needs and no part owns, below them all: it imports nothing of talk's.

    errors       the error tree and the exit code of each error
    digests      BLAKE2b, SHA-256 and a constant-time comparison, without loading OpenSSL
    files        private folders and files, the one atomic (and durable) replacement
    locks        flock around a change; the liveness lock a daemon holds for life
    held         whether another process holds a lock file, from the standard library alone
    ndjson       append logs of JSON lines, and the one policy for a torn last line
    backoff      how long to wait before trying again after failures
    daemon       liveness, status file, log, start and stop shared by talk's daemons
    printable    peer text made safe to show on a terminal and to an agent
    bounded_json JSON from peers and relays, parsed within size and depth limits
    mesh_fields  the shapes of opencode-mesh fields (task id, mode, status) every part checks
    message_ids  the short form of a message id, and a typed id or prefix resolved to one
    version      the project's one version, from the installed distribution
    home         where talk keeps an identity's files (TALK_HOME, one folder per identity)
    boot         which boot of this machine this is: how long an unsynced write lasts
    settings     numbers read from the environment (tests shorten times through them)
    slots        a small state file rewritten in place, never read half written
    parsed_file  a JSON file parsed again only when it changed on disk
    receipt_states  the states a receipt can report for a message
    faces        a package's face: its public modules, each loaded on first use

All of them are public (`__all__`, see `durable.faces`). Modules are imported by name (`from
durable.files import replace_file`): this package loads only its face, so a hook that needs one
module pays for that one.
"""

from __future__ import annotations

from durable.faces import face

__all__ = ("backoff", "boot", "bounded_json", "daemon", "digests", "errors", "faces", "files", "held", "home",
           "locks", "mesh_fields", "message_ids", "ndjson", "parsed_file", "printable", "receipt_states",
           "settings", "slots", "version")
__getattr__ = face(__name__, __all__)
