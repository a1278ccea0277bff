"""follower.history.readmarks: per contact, only forward, kept in a private JSON file."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from durable.errors import UserError
from follower.history.readmarks import READ_MARKS_FILE, ReadMarks
from tests.unit.samples import FP_A, FP_B


def test_marks_move_forward_only_and_say_how_many_moved(tmp_path: Path) -> None:
    marks = ReadMarks(tmp_path)
    assert marks.all() == {}
    assert marks.advance({FP_A: 10.0, FP_B: 5.0}) == 2
    assert marks.advance({FP_A: 3.0, FP_B: 6.0}) == 1
    assert marks.advance({}) == 0
    assert ReadMarks(tmp_path).all() == {FP_A: 10.0, FP_B: 6.0}
    assert stat.S_IMODE((tmp_path / READ_MARKS_FILE).stat().st_mode) == 0o600


def test_an_unchanged_mark_writes_nothing(tmp_path: Path) -> None:
    marks = ReadMarks(tmp_path)
    marks.advance({FP_A: 10.0})
    before = (tmp_path / READ_MARKS_FILE).stat().st_ino
    assert marks.advance({FP_A: 10.0}) == 0
    assert (tmp_path / READ_MARKS_FILE).stat().st_ino == before


def test_a_damaged_file_is_a_user_error_and_odd_values_are_ignored(tmp_path: Path) -> None:
    (tmp_path / READ_MARKS_FILE).write_text(json.dumps({FP_A: "x", FP_B: 4}))
    assert ReadMarks(tmp_path).all() == {FP_B: 4.0}
    (tmp_path / READ_MARKS_FILE).write_text("{not json")
    with pytest.raises(UserError, match="damaged"):
        ReadMarks(tmp_path).all()
