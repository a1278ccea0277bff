"""The Qwen door's files and status: where each lives, and what `talk status` shows of them.

Files, in the identity folder:

    alarm-qwen.lock         flock held by the live door: the only proof of life
    alarm-qwen.json         status: pid, the Qwen sessions it serves, Qwen's answers so far
    alarm-qwen.outbox.json  mail taken from the spools and not yet settled (qwen_outbox.py)
    alarm-qwen.log          the door's log (rotated)
    qwen-install.json       what `talk install qwen` did: the Qwen home it wired, whether it set
                            `agents.crossSessionInbound` (so uninstalling restores what was there)
    qwen-controller.json    a controller grant an earlier `talk install qwen` minted; installing or
                            uninstalling revokes it (talk no longer speaks as a controller)

The door (`alarms.hosts.qwen.daemon`) writes them; `talk status` and `talk alarm` read them here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from alarms.door_daemon import DaemonFiles
from durable import daemon

__all__ = ["DoorFiles", "door_status", "render_door", "running_pid"]


class DoorFiles(DaemonFiles):
    """The door's files (`alarms.door_daemon.DaemonFiles`), and what `talk install qwen` keeps."""

    def __init__(self, folder: Path) -> None:
        super().__init__(folder, "qwen")

    @property
    def install(self) -> Path:
        return self.folder / "qwen-install.json"

    @property
    def legacy_controller(self) -> Path:
        return self.folder / "qwen-controller.json"


def running_pid(folder: Path) -> int | None:
    return DoorFiles(folder).running_pid()


def door_status(folder: Path) -> dict[str, Any] | None:
    """The door's row for `talk status`, or None where Qwen Code was never wired in."""
    files = DoorFiles(folder)
    if not (files.install.exists() or files.status.exists()):
        return None
    saved = daemon.load_status(files.status) or {}
    pid = running_pid(folder)
    return {"running": pid is not None, "pid": pid, "installed": files.install.exists(),
            "sessions": saved.get("sessions", []) if pid else [], "waiting": saved.get("waiting", 0),
            "answers": saved.get("counts", {}), "last_error": saved.get("last_error"), "log": str(files.log)}


def render_door(row: dict[str, Any]) -> str:
    if not row["installed"]:
        return "Qwen door: not installed (run `talk install qwen`)"
    answers = ", ".join(f"{k} {v}" for k, v in sorted(row["answers"].items())) or "none yet"
    head = (f"Qwen door: running (pid {row['pid']}), serving {len(row['sessions'])} session(s)"
            if row["running"] else
            "Qwen door: not running (a Qwen session's start runs it; or `talk door qwen`)")
    text = f"{head}; {row['waiting']} message(s) not yet queued by Qwen; Qwen's answers: {answers}"
    return text + (f"\n  last error: {row['last_error']}" if row.get("last_error") else "")
