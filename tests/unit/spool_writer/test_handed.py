"""spool_writer.handed: the hand-over log, read after an offset, and emptied once read."""

from __future__ import annotations

import json
from pathlib import Path
from typing import cast

import pytest

import spool_writer.handed as handed
from durable.ndjson import read_after
from spool_writer.record import SpoolRecord
from tests.unit.samples import FP_A, FP_B, handed_lines, spool_message


def test_record_writes_one_line_per_message_with_its_session(tmp_path: Path) -> None:
    log = tmp_path / handed.HANDED_FILE
    handed.record(log, [{**spool_message("m1"), "text": "secret"}, spool_message("m2", FP_B)], "s1")
    lines = handed_lines(log)
    assert [(x["id"], x["from"], x["sid"]) for x in lines] == [("m1", FP_A, "s1"), ("m2", FP_B, "s1")]
    assert all(set(x) == {"id", "from", "sid", "ts", "state"} and x["state"] == "delivered" for x in lines)


def test_record_skips_records_without_an_id_or_sender(tmp_path: Path) -> None:
    log = tmp_path / handed.HANDED_FILE
    # Not SpoolRecords on purpose: lines read back from a hand-edited spool can be anything.
    bad = [{"from": FP_A}, {"id": "m1"}, {"id": 5, "from": FP_A}, {"id": "m2", "from": None}]
    handed.record(log, cast(list[SpoolRecord], bad), "s1")
    assert not log.exists()
    handed.record(log, cast(list[SpoolRecord], [{"id": "m3"}, {"id": "m4", "from": FP_A}]), "s1")
    assert [x["id"] for x in handed_lines(log)] == ["m4"]


def test_read_after_a_missing_log_is_empty(tmp_path: Path) -> None:
    assert read_after(tmp_path / "none.ndjson", 123) == ([], 0)


def test_read_after_returns_whole_lines_and_the_offset_after_them(tmp_path: Path) -> None:
    log = tmp_path / handed.HANDED_FILE
    handed.record(log, [spool_message("m1")], "s")
    first_end = log.stat().st_size
    handed.record(log, [spool_message("m2")], "s")
    items, offset = read_after(log, 0)
    assert [i["id"] for i in items] == ["m1", "m2"]
    assert offset == log.stat().st_size
    items, again = read_after(log, first_end)
    assert ([i["id"] for i in items], again) == (["m2"], offset)
    assert read_after(log, offset) == ([], offset)


def test_read_after_leaves_a_partial_last_line_for_later(tmp_path: Path) -> None:
    log = tmp_path / handed.HANDED_FILE
    handed.record(log, [spool_message("m1")], "s")
    whole = log.stat().st_size
    tail = json.dumps({"id": "m2", "from": FP_A, "sid": "s", "ts": 1.0}).encode()
    with open(log, "ab") as f:
        f.write(tail[:10])
    items, offset = read_after(log, 0)
    assert [i["id"] for i in items] == ["m1"]
    assert offset == whole
    with open(log, "ab") as f:
        f.write(tail[10:] + b"\n")
    items, offset = read_after(log, offset)
    assert [i["id"] for i in items] == ["m2"]
    assert offset == log.stat().st_size


def test_read_after_skips_lines_that_are_not_objects(tmp_path: Path) -> None:
    log = tmp_path / handed.HANDED_FILE
    log.write_bytes(b'not json\n[1, 2]\n{"id": "m1", "from": "x"}\n')
    items, offset = read_after(log, 0)
    assert items == [{"id": "m1", "from": "x"}]
    assert offset == log.stat().st_size


def test_read_after_an_offset_past_the_end_reads_from_the_start(tmp_path: Path) -> None:
    log = tmp_path / handed.HANDED_FILE
    handed.record(log, [spool_message("m1")], "s")
    items, offset = read_after(log, 10_000)
    assert [i["id"] for i in items] == ["m1"]
    assert offset == log.stat().st_size


def test_empty_if_read_truncates_a_large_log_read_to_its_end(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(handed, "TRUNCATE_AT", 64)
    log = tmp_path / handed.HANDED_FILE
    handed.record(log, [spool_message(f"m{i}") for i in range(5)], "s")
    _, offset = read_after(log, 0)
    assert offset >= 64
    assert handed.empty_if_read(log, offset) == 0
    assert log.stat().st_size == 0
    handed.record(log, [spool_message("m9")], "s")
    assert [i["id"] for i in read_after(log, 0)[0]] == ["m9"]


def test_empty_if_read_keeps_a_log_not_read_to_its_end(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(handed, "TRUNCATE_AT", 64)
    log = tmp_path / handed.HANDED_FILE
    handed.record(log, [spool_message(f"m{i}") for i in range(5)], "s")
    _, offset = read_after(log, 0)
    handed.record(log, [spool_message("late")], "s")  # came after the read
    size = log.stat().st_size
    assert handed.empty_if_read(log, offset) == offset
    assert log.stat().st_size == size


def test_empty_if_read_keeps_a_small_log_even_read_to_its_end(tmp_path: Path) -> None:
    log = tmp_path / handed.HANDED_FILE
    handed.record(log, [spool_message("m1")], "s")
    _, offset = read_after(log, 0)
    assert offset < handed.TRUNCATE_AT
    assert handed.empty_if_read(log, offset) == offset
    assert log.stat().st_size == offset


def test_empty_if_read_of_a_missing_log_starts_at_zero(tmp_path: Path) -> None:
    assert handed.empty_if_read(tmp_path / "none.ndjson", 500) == 0


