"""bench/retalk_cli.py's pure parts: the ratio, the summary, and what it does without retalk.
(The bench itself runs both tools against real relays; it is run by hand, not by the suite.)"""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import pytest

from tests.unit.bench.scripts import load_bench


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    return load_bench("retalk_cli")


def test_the_ratio_is_the_median_of_the_round_by_round_ratios(bench: ModuleType) -> None:
    assert bench.ratio([20.0, 60.0, 50.0], [10.0, 20.0, 20.0]) == 2.5


def test_without_retalk_it_says_so_and_measures_talk_only(
    bench: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert bench.retalk_programs(None) is None
    assert "no --retalk given" in capsys.readouterr().err
    assert bench.retalk_programs(str(tmp_path / "bin" / "retalk")) is None
    assert "not installed" in capsys.readouterr().err


def test_retalk_server_is_found_beside_retalk(bench: ModuleType, tmp_path: Path) -> None:
    for name in ("retalk", "retalk-server"):
        (tmp_path / name).write_text("#!/bin/sh\n")
        (tmp_path / name).chmod(0o755)
    assert bench.retalk_programs(str(tmp_path / "retalk")) == (
        str(tmp_path / "retalk"),
        str(tmp_path / "retalk-server"),
    )


def test_the_summary_gives_the_ratio_only_beside_retalk(bench: ModuleType) -> None:
    talk = {"receive": [50.0, 60.0], "send": [40.0, 40.0]}
    _, alone = bench.summary({"talk": talk}, 2)
    assert alone == {"receive_ms": 55.0, "send_ms": 40.0}
    _, both = bench.summary({"talk": talk, "retalk": {"receive": [100.0, 100.0], "send": [80.0, 80.0]}}, 2)
    assert both["retalk_receive_ms"] == 100.0 and both["ratio"] == {"receive": 0.55, "send": 0.5}
