"""`talk door opencode` and `talk door stop opencode`: start and stop the door of an opencode
session (`alarms.door.DaemonHost`). What they print is said here; the CLI only prints it.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from alarms.door import Done
from durable.errors import UserError

__all__ = ["start", "stop"]


def _started(pid: int, sid: str, url: str, started: bool, said: str) -> Done:
    return Done({"pid": pid, "session": sid, "url": url, "started": started}, said)


def start(folder: Path, given: Mapping[str, Any]) -> Done | int:
    """One door per session: a running one (for --session, or else for --url) is reported."""
    from alarms.hosts.opencode.api import split_url
    from alarms.hosts.opencode.install import live_door, new_session, spawn
    from spool_writer.layout import check_sid

    url, session, pid = str(given["url"]), given.get("session"), given.get("pid")
    try:
        split_url(url)
    except ValueError as exc:
        raise UserError(str(exc)) from exc
    url = url.rstrip("/")
    live = live_door(folder, url, check_sid(session) if session else None)
    if live is not None:
        return _started(live["pid"], live["session"], url, False,
                        f"opencode door already running for session {live['session']} (pid {live['pid']})")
    sid = session or new_session(url)
    if given.get("foreground"):
        from alarms.hosts.opencode.daemon import run

        return run(folder, url, sid, pid, foreground=True)
    child = spawn(folder, url, sid, pid)
    return _started(child, sid, url, True, f"opencode door for session {sid} at {url} (pid {child})")


def stop(folder: Path, given: Mapping[str, Any]) -> Done:
    from alarms.hosts.opencode.install import stop_doors

    stopped = stop_doors(folder, given.get("session"))
    if not stopped:
        return Done({"stopped": []}, "no opencode door is running")
    return Done({"stopped": stopped}, "\n".join(
        f"stopped the opencode door of session {r['session']} (pid {r['pid']})" for r in stopped))
