"""An opencode alarm's files and status: where each lives, and what `talk status` shows of them.

Files, in the identity folder, per opencode session SID:

    alarm-opencode-SID.lock         flock held by the live daemon: the only proof of life
    alarm-opencode-SID.json         status: pid, url, host pid, deliveries, last error
    alarm-opencode-SID.outbox.json  mail taken from the spool and not yet accepted (opencode_outbox.py)
    alarm-opencode-SID.log          the daemon's log (rotated)
    alarm-opencode-start.log        why a daemon that found no session to follow did not start

The daemon (`alarms.opencode`) writes them; `talk status` and `talk alarm` read them here, without
loading the daemon.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

from alarms.door_daemon import DaemonFiles
from alarms.hosts.opencode import NAME as HOST
from alarms.hosts.opencode.outbox import PromptOutbox
from alarms.mailbox import SessionMail
from durable import daemon
from durable.locks import held_by_other

__all__ = [
    "HOST",
    "DoorState",
    "SessionDoorFiles",
    "SessionDoorStatus",
    "render_door",
    "running_pid",
    "session_doors",
    "start_log",
]

PREFIX = f"alarm-{HOST}-"


class DoorState(StrEnum):
    STARTING = "starting"
    DELIVERING = "delivering"  # registered, opencode answers
    WAITING = "waiting for opencode"  # down, or refusing: mail is kept
    STOPPED = "stopped"


class SessionDoorFiles(DaemonFiles):
    """The files of the door for opencode session `sid` (`alarms.door_daemon.DaemonFiles`)."""

    def __init__(self, folder: Path, sid: str) -> None:
        super().__init__(folder, f"{HOST}-{sid}")


@dataclass
class SessionDoorStatus:
    pid: int = 0
    url: str = ""
    session: str = ""
    host_pid: int | None = None
    state: str = DoorState.STARTING.value
    since: float = 0.0
    delivered: int = 0  # messages opencode accepted
    taken: int = 0  # of those, seen taken into a run (checked when the session is idle)
    run: str = "unknown"  # the session: busy, idle, or unknown (the event stream is down)
    events: bool = False  # following opencode's event stream (else polling its status)
    last_delivery: float | None = None
    last_error: str | None = None
    last_error_at: float | None = None

    @classmethod
    def load(cls, path: Path) -> SessionDoorStatus | None:
        raw = daemon.load_status(path)
        if raw is None:
            return None
        return cls(**{k: v for k, v in raw.items() if k in cls.__dataclass_fields__})

    def save(self, path: Path) -> None:
        daemon.save_status(path, asdict(self))


def start_log(folder: Path) -> Path:
    return folder / f"{PREFIX}start.log"


def running_pid(folder: Path, sid: str) -> int | None:
    """The live alarm's pid for session `sid`, or None; -1 if alive but its status is unreadable."""
    return SessionDoorFiles(folder, sid).running_pid()


def session_doors(folder: Path) -> list[dict[str, Any]]:
    """Every opencode door of an identity, for `talk status`: running or not, and its mail."""
    rows = []
    for path in sorted(folder.glob(f"{PREFIX}*.json")):
        if path.name.endswith(".outbox.json"):
            continue
        status = SessionDoorStatus.load(path)
        if status is None or not status.session:
            continue
        files = SessionDoorFiles(folder, status.session)
        running = held_by_other(files.lock)
        outbox = PromptOutbox(files.outbox).load()
        pending = outbox.pending
        row = asdict(status)
        row.update(host=HOST, running=running, state=status.state if running else DoorState.STOPPED.value,
                   outbox=len(pending.ids) if pending else 0, waiting=_waiting(folder, status.session),
                   unsettled=sum(len(p.ids) for p in outbox.posted), log=str(files.log))
        rows.append(row)
    return rows


def render_door(row: dict[str, Any]) -> str:
    """One `session_doors` row in words, for `talk status`."""
    if not row["running"]:
        head = f"opencode door for session {row['session']}: not running"
        head += f" ({row['outbox']} message(s) in its outbox)" if row["outbox"] else ""
        return head + f"; start it with `talk door opencode --url {row['url']} --session {row['session']}`"
    text = (f"opencode door for session {row['session']} (pid {row['pid']}): {row['state']}, "
            f"{row['url']}, session {row['run']}, delivered {row['delivered']}, waiting {row['waiting']}, "
            f"outbox {row['outbox']}")
    if row.get("last_error") and row["state"] != DoorState.DELIVERING.value:
        text += f"\n  last error: {row['last_error']}"
    return text


def _waiting(folder: Path, sid: str) -> int:
    try:
        return SessionMail(folder, sid).waiting()
    except Exception:  # status must show what it can; a damaged cursor is reported elsewhere
        return -1
