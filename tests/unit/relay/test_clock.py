"""relay.clock: the system's clock in service; for a test, the system's plus a file's offset."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from relay.clock import TEST_CLOCK_ENV, OffsetClock, parse_offset, relay_clock


def test_without_the_variable_the_clock_is_the_systems_own() -> None:
    assert relay_clock({}) is time.time
    assert relay_clock({TEST_CLOCK_ENV: ""}) is time.time  # set but empty: still not a test clock


def test_a_test_clock_runs_ahead_by_what_its_file_says_read_at_every_call(tmp_path: Path) -> None:
    path = tmp_path / "clock"
    clock = relay_clock({TEST_CLOCK_ENV: str(path)})
    assert clock == OffsetClock(path)
    before = time.time()
    assert before <= clock() <= time.time()  # no file yet: no offset
    path.write_text("3600")
    assert before + 3600 <= clock() <= time.time() + 3600
    path.write_text("-60.5\n")  # moved again without a restart: the file is read every time
    assert clock() <= time.time() - 60.5


@pytest.mark.parametrize(("text", "offset"), [("", 0.0), (" \n", 0.0), ("61", 61.0), ("1.5\n", 1.5),
                                              ("-2", -2.0)])
def test_an_offset_is_a_number_of_seconds(text: str, offset: float) -> None:
    assert parse_offset(text) == offset


@pytest.mark.parametrize("text", ["soon", "1 h", "nan", "inf", "-inf"])
def test_an_offset_that_is_not_a_finite_number_is_refused(text: str) -> None:
    with pytest.raises(ValueError):
        parse_offset(text)
