"""`talk door qwen` and `talk door stop qwen`: start and stop the Qwen Code door by hand
(`alarms.door.DaemonHost`; its SessionStart hook also starts it). What they print is said here.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from alarms.door import Done

__all__ = ["start", "stop"]


def start(folder: Path, given: Mapping[str, Any]) -> Done:
    from alarms.hosts.qwen.daemon import ensure, installed_home, require_installed
    from alarms.hosts.qwen.registry import qwen_home as default_home

    require_installed(folder)  # refuse early, with the fix
    home = given.get("qwen_home") or installed_home(folder) or default_home()
    pid = ensure(folder, Path(home).expanduser().resolve())
    return Done({"pid": pid}, f"Qwen door running (pid {pid})")


def stop(folder: Path, given: Mapping[str, Any]) -> Done:
    from alarms.hosts.qwen.status import running_pid
    from durable import daemon

    pid = running_pid(folder)
    if pid is None or pid <= 0:
        return Done({"stopped": None}, "no Qwen door is running")
    daemon.stop([pid], lambda: running_pid(folder) is not None, "Qwen door")
    return Done({"stopped": pid}, f"stopped the Qwen door (pid {pid})")
