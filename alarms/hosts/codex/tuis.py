"""The Codex TUI sessions the waker watches, and starting the waker when one has none.

Hooks run only while a turn does, so mail for an idle Codex TUI would wait for the user's next
prompt. The waker (`alarms.hosts.codex.waker`, one process per identity) starts a turn in such a
TUI. It learns of a TUI session from the session's hooks: when a hook registers a session whose
host is a TUI, it writes `codex/SID.json` in the identity folder (the thread's rollout, its
CODEX_HOME and folder, and the codex program the TUI runs) and starts the waker unless one holds
`codex/waker.lock`. Every later hook run of that session checks the lock again (a stat, an open
and a flock, in `alarms.hosts.codex.hook` without importing this module), so a killed waker is back
with the session's next turn; meanwhile mail waits, and the Stop hook still hands it on. The
waker forgets a record whose session is no longer registered.
"""

from __future__ import annotations

import contextlib
import json
import os
from dataclasses import asdict, dataclass

FOLDER = "codex"
LOCK = "waker.lock"
LOG = "waker.log"
SUFFIX = ".json"


@dataclass(frozen=True)
class TuiSession:
    sid: str
    codex_bin: str  # the program the TUI runs: `codex queue` of the same release
    codex_home: str
    cwd: str
    transcript: str  # the thread's rollout file

    @classmethod
    def from_json(cls, obj: object) -> TuiSession:
        names = cls.__dataclass_fields__
        if not isinstance(obj, dict) or not all(isinstance(obj.get(k), str) for k in names):
            raise ValueError("not a Codex TUI session record")
        return cls(**{k: obj[k] for k in names})


def folder_of(identity: str | os.PathLike[str]) -> str:
    return os.path.join(identity, FOLDER)


def record_path(identity: str | os.PathLike[str], sid: str) -> str:
    return os.path.join(folder_of(identity), sid + SUFFIX)


def save(identity: str | os.PathLike[str], session: TuiSession) -> None:
    """Write the record atomically (a half-written one would be read as no record)."""
    from pathlib import Path

    from durable.files import write_json

    Path(folder_of(identity)).mkdir(mode=0o700, exist_ok=True)
    write_json(Path(record_path(identity, session.sid)), asdict(session))


def load_all(identity: str | os.PathLike[str]) -> dict[str, TuiSession]:
    """Every readable record; a damaged one is skipped (its session's next hook run rewrites it)."""
    found: dict[str, TuiSession] = {}
    try:
        names = os.listdir(folder_of(identity))
    except OSError:
        return found
    for name in names:
        if not name.endswith(SUFFIX):
            continue
        try:
            with open(os.path.join(folder_of(identity), name), "rb") as f:
                session = TuiSession.from_json(json.loads(f.read()))
        except (OSError, ValueError):
            continue
        if name == session.sid + SUFFIX:
            found[session.sid] = session
    return found


def forget(identity: str | os.PathLike[str], sid: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(record_path(identity, sid))


def start_waker(identity: str | os.PathLike[str]) -> None:
    """Start the waker detached (its own session, so Codex ending the hook does not end it), and
    do not wait: two hooks starting one each leave one, the other finds the lock held and exits."""
    import subprocess
    import sys

    # the folder holding `alarms` (this file is alarms/hosts/codex/tuis.py), four levels up; never
    # alarms/ itself, whose mailbox.py would shadow the standard library's
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    code = (f"import sys; sys.path.insert(0, {root!r}); from alarms.hosts.codex.waker import main; "
            "sys.exit(main())")
    subprocess.Popen([sys.executable, "-I", "-S", "-c", code, "--folder", os.fspath(identity)],
                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                     start_new_session=True, close_fds=True)
