"""What `talk status` shows of the Qwen door, from its files alone."""

from __future__ import annotations

from pathlib import Path

from alarms.hosts.qwen.status import DoorFiles, door_status, render_door
from durable import daemon


def test_nothing_is_shown_where_qwen_was_never_wired_in(tmp_path: Path) -> None:
    assert door_status(tmp_path) is None


def test_a_stopped_door_shows_what_waits_and_how_to_start_it(tmp_path: Path) -> None:
    files = DoorFiles(tmp_path)
    files.install.write_text("{}")
    daemon.save_status(files.status, {"pid": 123, "sessions": ["s1"], "waiting": 2,
                                      "counts": {"delivered": 3, "held": 1}, "last_error": "x: gone"})
    row = door_status(tmp_path)
    assert row is not None and row["running"] is False and row["sessions"] == [] and row["waiting"] == 2
    text = render_door(row)
    assert "not running" in text and "talk door qwen" in text and "delivered 3, held 1" in text
    assert "last error: x: gone" in text
    files.install.unlink()
    assert "talk install qwen" in render_door(door_status(tmp_path) or {})
