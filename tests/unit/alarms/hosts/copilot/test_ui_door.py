"""alarms.hosts.copilot.ui_door: how the door knows the Copilot it reached is the one talk started
(the session's holder, listening on the port, below the process talk launched)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from alarms.hosts.copilot.ui_door import descends_from, holder_pid


def test_a_process_descends_from_its_parents_and_not_from_a_stranger() -> None:
    child = subprocess.Popen(["sleep", "30"])
    try:
        assert descends_from(child.pid, os.getpid()) and descends_from(child.pid, child.pid)
        assert not descends_from(os.getpid(), child.pid)
    finally:
        child.kill()
        child.wait()


def test_the_holder_is_the_live_process_of_an_inuse_lock(tmp_path: Path) -> None:
    gone = subprocess.Popen(["true"])
    gone.wait()
    (tmp_path / f"inuse.{gone.pid}.lock").write_text("")
    assert holder_pid(str(tmp_path)) is None
    (tmp_path / f"inuse.{os.getpid()}.lock").write_text("")
    assert holder_pid(str(tmp_path)) == os.getpid()
