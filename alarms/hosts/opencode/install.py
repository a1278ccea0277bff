"""opencode's doors as `talk install`, `talk uninstall`, `talk alarm` and `talk doctor` see them.

opencode needs nothing written into its config: its door is a daemon per opencode session
(`alarms.hosts.opencode.daemon`), started by `talk door opencode --url URL` and posting each batch of
mail to the server as a prompt. So `install` only says how to start one, and `uninstall` stops
every opencode door of the identity (their mail stays in the spool and their outboxes).
One door per opencode session; asking again for a session (or, without one, for a server URL)
that already has a live door reports it.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from alarms.door import Done, Request
from alarms.hosts.opencode import NAME as HOST
from alarms.wiring import State, Wiring
from durable.errors import UserError

__all__ = ["live_door", "new_session", "spawn", "stop_doors"]

START = "talk door opencode --url URL"


def live_door(folder: Path, url: str, sid: str | None) -> dict[str, Any] | None:
    """The running door serving `sid` (or, with no sid, the server `url`), if any."""
    from alarms.hosts.opencode.status import session_doors

    for row in session_doors(folder):
        if row["running"] and (row["session"] == sid if sid else row["url"] == url.rstrip("/")):
            return row
    return None


def spawn(folder: Path, url: str, sid: str, pid: int | None, python: str = sys.executable) -> int:
    """Start the daemon in its own session and wait until it holds the liveness lock."""
    from alarms.hosts.opencode.status import SessionDoorFiles, running_pid
    from durable import daemon

    argv = [python, "-m", "alarms.hosts.opencode.daemon", "--folder", str(folder), "--url", url,
            "--session", sid]
    if pid is not None:
        argv += ["--pid", str(pid)]
    return daemon.spawn(argv, lambda child: running_pid(folder, sid) == child, "opencode door",
                        SessionDoorFiles(folder, sid).log)


def new_session(url: str) -> str:
    """A new opencode session on the server at `url`, for a door started without --session."""
    from alarms.hosts.opencode.api import OpencodeClient, OpencodeError

    try:
        return OpencodeClient(url).create_session()
    except (OpencodeError, ValueError) as exc:
        raise UserError(f"cannot create an opencode session at {url} ({exc}); start `opencode serve` "
                        "there, or pass --session ID of an existing session") from exc


def stop_doors(folder: Path, session: str | None = None) -> list[dict[str, Any]]:
    """Stop the running opencode doors of an identity (or of one session); those stopped."""
    from alarms.hosts.opencode.status import running_pid, session_doors
    from durable import daemon

    rows = [r for r in session_doors(folder) if r["running"] and (session is None or r["session"] == session)]
    if rows:
        daemon.stop([r["pid"] for r in rows], lambda: any(running_pid(folder, r["session"]) for r in rows),
                    "opencode door")
    return [{"session": r["session"], "pid": r["pid"]} for r in rows]


def identity_of(request: Request) -> Path | None:
    from alarms.mailbox import NoIdentity, identity_folder

    try:
        return identity_folder(dict(request.env, **({"TALK_USER": request.user} if request.user else {})))
    except NoIdentity:
        return None


def install(request: Request) -> Done:
    """Nothing to write: say how to start a door."""
    return Done({"installed": []}, f"opencode needs nothing installed: `{START}` starts a door for one "
                "of its sessions (`opencode serve` must run there)")


def uninstall(request: Request) -> Done:
    """Stop every opencode door of the identity; install wrote nothing to take out."""
    folder = identity_of(request)
    stopped = stop_doors(folder) if folder is not None else []
    said = "\n".join(f"stopped the opencode door of session {r['session']} (pid {r['pid']})" for r in stopped)
    return Done({"stopped": stopped}, said or "no opencode door is running")


def paths() -> list[Path]:
    """opencode's install writes into no host folder."""
    return []


def wiring(folder: Path | None) -> Wiring:
    """The opencode doors of an identity, for `talk doctor`: one stopped while mail waits for its
    session is a problem, and so is one running that cannot deliver (opencode down, refusing, or
    not the user's own); one stopped with nothing waiting is a session that ended."""
    from alarms.hosts.opencode.status import DoorState, session_doors

    rows = session_doors(folder) if folder is not None else []
    if not rows:
        return Wiring(HOST, State.ABSENT, f"no door started ({START} starts one)")
    stuck = [r for r in rows if not r["running"] and (r["outbox"] or r["waiting"] > 0)]
    if stuck:
        r = stuck[0]
        return Wiring(HOST, State.INCOMPLETE,
                      f"the door for session {r['session']} is not running and mail waits for it",
                      f"talk door opencode --url {r['url']} --session {r['session']}")
    waiting = [r for r in rows if r["running"] and r["state"] == DoorState.WAITING and r["last_error"]]
    if waiting:
        r = waiting[0]
        return Wiring(HOST, State.INCOMPLETE,
                      f"the door for session {r['session']} cannot deliver: {r['last_error']}",
                      "talk status")
    running = sum(1 for r in rows if r["running"])
    return Wiring(HOST, State.WIRED, f"{running} door(s) running, {len(rows) - running} stopped")
