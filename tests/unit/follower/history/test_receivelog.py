"""follower.history.receivelog: what `talk receive` handed out, stamped, private, trimmed to its newest."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

import follower.history.receivelog as receivelog_mod
from durable.ndjson import read_records
from follower.history.receivelog import RECEIVE_LOG_FILE, ReceiveLog
from follower.history.timeline import epoch
from tests.unit.samples import FP_A, hexid


def message(n: int) -> dict[str, object]:
    return {"id": hexid(n), "from": FP_A, "name": "alice", "text": f"text {n}",
            "ts": "2030-01-01T00:00:00Z", "kind": "chat", "hops": [FP_A]}


def test_each_message_is_kept_whole_with_its_arrival_on_this_clock(tmp_path: Path) -> None:
    log = ReceiveLog(tmp_path)
    log.add(message(1))
    log.add(message(1))  # taken again after a crash before its ack: a second line, shown once
    first, again = read_records(tmp_path / RECEIVE_LOG_FILE)
    assert {k: v for k, v in first.items() if k != "received"} == message(1)
    assert 0 < epoch(first["received"]) <= epoch(again["received"])
    assert stat.S_IMODE((tmp_path / RECEIVE_LOG_FILE).stat().st_mode) == 0o600


def test_past_its_limit_the_log_keeps_only_its_newest_whole_lines(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(receivelog_mod, "TRIM_BYTES", 2000)
    monkeypatch.setattr(receivelog_mod, "KEEP_BYTES", 1000)
    log, path = ReceiveLog(tmp_path), tmp_path / RECEIVE_LOG_FILE
    sizes = []
    for n in range(60):  # each line is about 200 bytes
        log.add(message(n))
        sizes.append(path.stat().st_size)
    assert max(sizes) <= 2000 + 300  # one line past the limit at most, then trimmed
    kept = [r["id"] for r in read_records(path)]
    assert 2 < len(kept) < 10 and kept == [hexid(n) for n in range(60 - len(kept), 60)]


def test_a_torn_last_line_loses_no_later_message(tmp_path: Path) -> None:
    log, path = ReceiveLog(tmp_path), tmp_path / RECEIVE_LOG_FILE
    log.add(message(1))
    with path.open("ab") as f:
        f.write(b'{"id": "torn')  # a write cut short
    log.add(message(2))
    assert [r["id"] for r in read_records(path)] == [hexid(1), hexid(2)]
