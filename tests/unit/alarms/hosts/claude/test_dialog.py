"""alarms.hosts.claude.dialog: whether the session waits on its person, from its registry record."""

from __future__ import annotations

import json
from pathlib import Path

from alarms.hosts.claude.dialog import UNNAMED, waiting, waiting_on


def test_only_a_waiting_status_holds_mail() -> None:
    assert waiting_on({"status": "waiting", "waitingFor": "permission prompt"}) == "permission prompt"
    assert waiting_on({"status": "waiting", "waitingFor": "dialog open"}) == "dialog open"
    assert waiting_on({"status": "waiting"}) == UNNAMED  # open, though unnamed
    for status in ("busy", "idle"):
        assert waiting_on({"status": status, "waitingFor": "permission prompt"}) is None
    assert waiting_on({"pid": 5, "messagingSocketPath": "/s.sock"}) is None  # no status: an older record
    assert waiting_on(None) is None  # no record: nothing to hold on


def test_the_read_follows_the_record_as_claude_code_rewrites_it(tmp_path: Path) -> None:
    env = {"CLAUDE_CONFIG_DIR": str(tmp_path)}
    record = tmp_path / "sessions" / "4242.json"
    assert waiting(env, 4242) is None
    record.parent.mkdir()
    record.write_text(json.dumps({"pid": 4242, "status": "waiting", "waitingFor": "permission prompt"}))
    assert waiting(env, 4242) == "permission prompt"
    assert waiting({"HOME": str(tmp_path)}, 4242) is None  # another config dir, another record
    record.write_text(json.dumps({"pid": 4242, "status": "busy"}))
    assert waiting(env, 4242) is None
    record.write_text('{"pid": 4242, "status": "wai')  # caught mid-write: judged at the next poll
    assert waiting(env, 4242) is None
