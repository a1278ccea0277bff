"""bench/wake_latency.py's pure parts: where a message came, the statistics and the JSON line.
(The bench itself drives the real hosts; it is run by hand, not by the suite.)"""

from __future__ import annotations

import json
from types import ModuleType

import pytest

from tests.unit.bench.scripts import load_bench


@pytest.fixture(scope="module")
def wake() -> ModuleType:
    return load_bench("wake_latency")


def test_outcome_from_request_numbers(wake: ModuleType) -> None:
    assert wake.outcome("idle", 7, None) == "woken"
    assert wake.outcome("idle", None, None) == "not_delivered"
    assert wake.outcome("midturn", 5, 5) == "at_boundary"
    assert wake.outcome("midturn", 6, 5) == "after_turn"  # a later request: after the turn's last step
    assert wake.outcome("midturn", 4, 5) == "during_tool"
    assert wake.outcome("midturn", 6, None) == "after_turn"  # the tool's output never came back
    assert wake.outcome("midturn", None, 5) == "not_delivered"


def test_latency_is_from_the_send_when_idle_and_from_the_tool_end_mid_turn(wake: ModuleType) -> None:
    assert wake.Sample("idle", sent=10.0, seen=10.8, seen_n=3).latency == pytest.approx(0.8)
    mid = wake.Sample("midturn", sent=10.0, seen=13.4, seen_n=4, tool_end=13.0, boundary=13.3, boundary_n=4)
    assert mid.latency == pytest.approx(0.4) and mid.outcome == "at_boundary"
    assert wake.Sample("midturn", sent=10.0).latency is None  # nothing came


def test_summary_has_medians_p90_outcomes_and_flags_mail_that_waited_for_the_turn(wake: ModuleType) -> None:
    S = wake.Sample
    samples = [
        S("idle", sent=0.0, spooled=0.1, seen=0.5, seen_n=1),
        S("idle", sent=0.0, spooled=0.2, seen=0.7, seen_n=2),
        S("idle", sent=0.0),  # not delivered
        S("midturn", sent=0.0, tool_end=3.0, boundary=3.2, boundary_n=5, seen=3.2, seen_n=5),
        S("midturn", sent=0.0, tool_end=3.0, boundary=3.3, boundary_n=8, seen=9.0, seen_n=9),
    ]
    out = wake.summarize(samples)
    assert out["idle_median_s"] == 0.6 and out["idle_p90_s"] == 0.7 and out["idle_delivered"] == "2/3"
    assert out["idle_send_to_spool_median_s"] == 0.15
    assert out["midturn_lag_median_s"] == 3.1 and out["midturn_lag_p90_s"] == 6.0
    assert out["midturn_boundary_median_s"] == 0.25
    assert out["midturn_outcomes"] == {"at_boundary": 1, "after_turn": 1}
    assert out["midturn_flag"] == "not delivered mid-turn in 1 of 2 runs"
    on_time = wake.summarize(samples[3:4])
    assert "midturn_flag" not in on_time and "idle_median_s" not in on_time


def test_nothing_delivered_gives_nulls_not_a_crash(wake: ModuleType) -> None:
    out = wake.summarize([wake.Sample("idle", sent=0.0), wake.Sample("midturn", sent=0.0, tool_end=1.0)])
    assert out["idle_median_s"] is None and out["midturn_lag_median_s"] is None
    assert out["midturn_outcomes"] == {"not_delivered": 1}
    assert "not_delivered" in wake.table("codex", [wake.Sample("midturn", sent=0.0)])


def test_the_json_line_has_the_agreed_shape(wake: ModuleType) -> None:
    results = {"claude": wake.summarize([wake.Sample("idle", sent=0.0, seen=0.9, seen_n=1)]),
               "opencode": {"error": "opencode serve exited 1"}}
    line = json.loads(json.dumps(wake.result_line(results, 3, 1.234)))
    assert line["bench"] == "wake_latency" and line["load"] == 1.23 and line["runs"] == 3
    assert line["results"]["claude"]["idle_median_s"] == 0.9
    assert line["results"]["opencode"] == {"error": "opencode serve exited 1"}


def test_hosts_are_checked_by_name(wake: ModuleType) -> None:
    assert wake.parse_args(["--hosts", "codex,claude"]).hosts == ["codex", "claude"]
    every = wake.parse_args([]).hosts
    assert every == list(wake.HOSTS)
    assert {"claude", "codex", "codex-run", "opencode", "pi", "gemini", "qwen", "copilot"} <= set(every)
    with pytest.raises(SystemExit):
        wake.parse_args(["--hosts", "vim"])
