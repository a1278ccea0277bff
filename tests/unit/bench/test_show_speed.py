"""bench/show_speed.py's pure parts: the statistics, the budget verdict and the answer checks.
(The bench itself builds a conversation over a real relay; it is run by hand, not by the suite.)"""

from __future__ import annotations

import json
from types import ModuleType

import pytest

from tests.unit.bench.scripts import load_bench


@pytest.fixture(scope="module")
def speed() -> ModuleType:
    return load_bench("show_speed")


def test_summary_and_the_round_by_round_ratio(speed: ModuleType) -> None:
    assert speed.summary([30.0, 10.0, 20.0]) == {"median": 20.0, "p90": 30.0, "min": 10.0}
    # Rounds 2x, 3x, 2.5x slower: the median of those, not the ratio of two medians.
    assert speed.ratio([20.0, 60.0, 50.0], [10.0, 20.0, 20.0]) == 2.5


def test_the_budget_holds_the_median_of_each_show_measurement(speed: ModuleType) -> None:
    samples = {"show": [100.0, 290.0, 900.0], "show_json": [310.0, 320.0, 100.0],
               "show_all": [250.0, 330.0, 340.0], "python_read": [999.0], "log": [999.0]}
    assert speed.over_budget(samples, 300.0) == ["show_json", "show_all"]
    assert speed.over_budget(samples, 330.0) == []


def test_a_measurement_counts_only_when_the_command_answered_in_full(speed: ModuleType) -> None:
    lines = "\n".join(f"line {i}" for i in range(speed.SHOWN))
    assert speed.did_its_work("show", lines, 500)
    assert not speed.did_its_work("show", "no messages with alice yet", 500)
    assert speed.did_its_work("show_json", json.dumps([{}] * speed.SHOWN), 500)
    every = "\n".join(f"line {i}" for i in range(1001))
    assert speed.did_its_work("show_all", every, 500) and not speed.did_its_work("show_all", lines, 500)
    assert speed.did_its_work("python_read", "1500", 500) and not speed.did_its_work("python_read", "3", 500)
    assert speed.did_its_work("log", "message \n" * 500, 500) and not speed.did_its_work("log", "", 500)


def test_the_report_has_a_row_per_measurement(speed: ModuleType) -> None:
    table = speed.report({name: [1.0, 2.0] for name in speed.NAMES}, 2)
    assert len(table.splitlines()) == 1 + len(speed.NAMES) and "talk show alice --json" in table
