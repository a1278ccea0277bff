"""follower.tasks.ledger: the task ledger folds sends, results and questions per peer."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from follower.tasks.ledger import TaskLedger
from follower.tasks.ledger import fold as fold_tasks
from tests.unit.samples import FP_A, FP_B, FP_C, hexid


def test_fold_a_task_sent_then_its_result_received() -> None:
    events = [
        {"ev": "task", "dir": "out", "peer": FP_B, "name": "bob", "task": "T1", "mode": "one-shot",
         "text": "build it", "ts": 10.0},
        {"ev": "result", "dir": "in", "peer": FP_B, "name": "bob", "task": "T1", "status": "done",
         "summary": "built", "artifacts": ["a.txt"], "ts": 20.0},
    ]
    [row] = fold_tasks(events).values()
    assert row == {"task": "T1", "peer": FP_B, "name": "bob", "asked_by": "me", "mode": "one-shot",
                   "text": "build it", "status": "done", "summary": "built", "artifacts": ["a.txt"],
                   "retries": 0, "updated": 20.0}


def test_fold_keeps_the_latest_time_whatever_the_order() -> None:
    events = [{"ev": "result", "peer": FP_B, "task": "T1", "status": "done", "ts": 30.0},
              {"ev": "task", "dir": "in", "peer": FP_B, "task": "T1", "ts": 10.0}]
    [row] = fold_tasks(events).values()
    assert (row["updated"], row["status"], row["asked_by"]) == (30.0, "done", "peer")


def test_fold_tasks_skips_events_without_a_task_or_peer() -> None:
    events = [{"ev": "task", "peer": FP_B, "ts": 1.0}, {"ev": "task", "task": "T1", "ts": 1.0},
              {"ev": "task", "task": 5, "peer": FP_B}]
    assert fold_tasks(events) == {}


def test_fold_keeps_the_same_task_id_of_two_peers_apart() -> None:
    events = [{"ev": "task", "dir": "in", "peer": FP_B, "task": "T1", "ts": 1.0},
              {"ev": "task", "dir": "in", "peer": FP_C, "task": "T1", "ts": 2.0}]
    rows = fold_tasks(events)
    assert set(rows) == {f"{FP_B}/T1", f"{FP_C}/T1"}
    assert all(r["retries"] == 0 for r in rows.values())


def test_ledger_task_sent_then_result_received(tmp_path: Path) -> None:
    ledger = TaskLedger(tmp_path)
    ledger.record("task", "out", FP_B, "bob", {"task": "T1", "mode": "one-shot", "text": "do it"}, FP_A)
    ledger.record("result", "in", FP_B, "bob",
                  {"task": "T1", "status": "partial", "summary": "half", "artifacts": []}, FP_C)
    [row] = ledger.find("T1")
    assert (row["asked_by"], row["status"], row["summary"], row["text"]) == ("me", "partial", "half", "do it")
    assert not ledger.seen_task(FP_B, "T1")  # we sent it: it was never received


def test_ledger_task_received_twice_is_a_retry_from_that_peer_only(tmp_path: Path) -> None:
    ledger = TaskLedger(tmp_path)
    assert not ledger.seen_task(FP_B, "T1")
    for msg in (FP_A, FP_C):
        ledger.record("task", "in", FP_B, "bob", {"task": "T1", "mode": "one-shot", "text": "do it"}, msg)
    [row] = ledger.rows()
    assert (row["retries"], row["asked_by"], row["status"]) == (1, "peer", "open")
    assert ledger.seen_task(FP_B, "T1")
    assert not ledger.seen_task(FP_C, "T1")
    assert not ledger.seen_task(FP_B, "T2")


def test_ledger_forgets_tasks_idle_for_a_month_once_it_grows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import follower.tasks.ledger as tasks_mod

    ledger = TaskLedger(tmp_path)
    old = time.time() - (tasks_mod.KEEP_DAYS + 1) * 86400
    monkeypatch.setattr(time, "time", lambda: old)  # the clock follower.tasks.ledger reads
    for n in range(50):
        fields = {"task": f"OLD{n}", "mode": "one-shot", "text": "x" * 150}
        ledger.record("task", "in", FP_B, "bob", fields, FP_A)
    monkeypatch.undo()
    ledger.record("task", "in", FP_B, "bob", {"task": "NEW", "mode": "one-shot", "text": "now"}, FP_A)
    assert ledger.seen_task(FP_B, "OLD0") and len(ledger.rows()) == 51  # under the limit: all kept
    monkeypatch.setattr(tasks_mod, "TRIM_BYTES", 1000)
    ledger.record("result", "out", FP_B, "bob", {"task": "NEW", "status": "done", "summary": "ok"}, FP_C)
    assert [r["task"] for r in ledger.rows()] == ["NEW"]
    assert ledger.seen_task(FP_B, "NEW") and not ledger.seen_task(FP_B, "OLD0")
    [row] = ledger.find("NEW")
    assert (row["status"], row["asked_by"]) == ("done", "peer")


def test_ledger_keeps_only_protocol_fields_and_a_short_text(tmp_path: Path) -> None:
    ledger = TaskLedger(tmp_path)
    ledger.record("task", "in", FP_B, "bob",
                  {"task": "T1", "mode": "one-shot", "text": "t" * 500, "task_trust": True, "x": 1}, FP_A)
    [event] = [json.loads(line) for line in ledger.path.read_text().splitlines()]
    assert "task_trust" not in event and "x" not in event
    assert event["text"] == "t" * 200
    assert (event["msg"], event["dir"], event["peer"]) == (FP_A, "in", FP_B)


def test_ledger_question_sets_status_while_the_task_is_open(tmp_path: Path) -> None:
    ledger = TaskLedger(tmp_path)
    ledger.record("task", "out", FP_B, "bob", {"task": "T1", "mode": "one-shot"}, FP_A)
    ledger.record("question", "in", FP_B, "bob", {"task": "T1", "question": "which branch?"}, FP_C)
    [row] = ledger.rows()
    assert (row["status"], row["summary"]) == ("question", "which branch?")


def test_ledger_question_after_a_result_leaves_the_status(tmp_path: Path) -> None:
    ledger = TaskLedger(tmp_path)
    ledger.record("task", "out", FP_B, "bob", {"task": "T1", "mode": "one-shot"}, FP_A)
    ledger.record("result", "in", FP_B, "bob", {"task": "T1", "status": "done", "summary": "ok"}, FP_C)
    ledger.record("question", "in", FP_B, "bob", {"task": "T1", "question": "anything else?"}, hexid(3))
    [row] = ledger.rows()
    assert (row["status"], row["summary"]) == ("done", "ok")


def test_ledger_retry_after_a_result_keeps_the_result(tmp_path: Path) -> None:
    ledger = TaskLedger(tmp_path)
    ledger.record("task", "in", FP_B, "bob", {"task": "T1", "mode": "one-shot"}, FP_A)
    ledger.record("result", "out", FP_B, "bob", {"task": "T1", "status": "failed"}, FP_C)
    ledger.record("task", "in", FP_B, "bob", {"task": "T1", "mode": "one-shot"}, hexid(3))
    [row] = ledger.rows()
    assert (row["status"], row["retries"]) == ("failed", 1)


