"""The opencode door's line in `talk doctor`, from the door files of an identity: none started is
fine, a stopped door with nothing waiting is a session that ended, one with mail waiting is not."""

from __future__ import annotations

from pathlib import Path

from alarms.hosts.opencode.install import wiring as opencode_wiring
from alarms.hosts.opencode.outbox import PromptOutbox, PromptOutboxState, new_prompt
from alarms.hosts.opencode.status import SessionDoorFiles, SessionDoorStatus
from alarms.wiring import State

URL = "http://127.0.0.1:1"


def test_opencode_wiring_warns_only_for_a_stopped_door_with_mail_waiting(tmp_path: Path) -> None:
    assert opencode_wiring(tmp_path).state is State.ABSENT
    files = SessionDoorFiles(tmp_path, "ses_x")
    SessionDoorStatus(pid=123, url=URL, session="ses_x", state="delivering").save(files.status)
    ended = opencode_wiring(tmp_path)
    assert (ended.status, ended.detail) == ("ok", "0 door(s) running, 1 stopped")
    record = {"id": "a", "from": "f" * 32, "name": "alice", "text": "hi", "ts": "2026-01-01T00:00:00Z",
              "kind": "chat"}
    PromptOutbox(files.outbox).save(PromptOutboxState(new_prompt([record], "x", 1)))  # type: ignore[list-item]
    stuck = opencode_wiring(tmp_path)
    assert (stuck.state, stuck.status) == (State.INCOMPLETE, "warn") and "ses_x" in stuck.detail
    assert stuck.fix == f"talk door opencode --url {URL} --session ses_x"
