"""talk.spool_log: the spool for a person; each message once, damaged lines named by number."""

from __future__ import annotations

import json
from pathlib import Path
from typing import cast

from spool_writer.layout import generations
from spool_writer.record import SpoolRecord
from spool_writer.spool import Spool
from talk.spool_log import Damaged, SpoolLog, log_line, parse_line


def message(msg_id: str, text: str = "hello", **more: str) -> SpoolRecord:
    return cast(SpoolRecord, {"id": msg_id, "from": "a" * 32, "name": "alice", "text": text,
                              "ts": "2026-01-01T00:00:00Z", "kind": "chat", **more})


def test_parse_line_gives_the_record_or_why_there_is_none() -> None:
    assert parse_line(json.dumps(message("m1")).encode()) == message("m1")
    assert parse_line(b'{"id": "m1", "text": "cut') == "not JSON (a write cut short?)"
    assert parse_line(b'"just a string"') == "not a JSON object"
    assert parse_line(json.dumps({**message("m1"), "name": 7}).encode()) == "name not text"


def test_log_line_shows_time_short_id_sender_kind_and_indented_text() -> None:
    line = log_line(message("0123456789abcdef" * 2, "one\ntwo", received="2026-01-01T00:00:00Z"))
    stamp, rest = line[:19], line[19:]
    assert stamp[:4] == "2026" or stamp[:4] == "2025"  # local time of that UTC instant
    assert rest == "  0123456789ab  alice: one\n    two"
    assert log_line(message("m2", "do it", kind="task")).endswith("  m2  alice (task): do it")
    assert log_line(message("m3", received="yesterday")).startswith("yesterday  m3")


def test_read_goes_on_where_it_stopped_across_a_rotation(tmp_path: Path) -> None:
    spool = Spool(tmp_path / "spool", max_bytes=400, generations=3)
    inbox = spool.layout.inbox
    log = SpoolLog()
    spool.deliver(message("m1"))
    assert [r["id"] for r in log.read([inbox])[0]] == ["m1"]
    assert log.read([inbox]) == ([], [])  # nothing new
    for n in range(2, 6):
        spool.deliver(message(f"m{n}", "x" * 150))  # the inbox rotates on the way
    assert generations(inbox)  # the first lines now sit in a rotated file
    records, damaged = log.read([inbox])
    assert [r["id"] for r in records] == ["m2", "m3", "m4", "m5"] and damaged == []


def test_a_message_in_several_files_shows_once_and_damage_is_named(tmp_path: Path) -> None:
    one, two = tmp_path / "a.ndjson", tmp_path / "b.ndjson"
    one.write_bytes(json.dumps(message("m1")).encode() + b"\n" + b"garbage\n")
    two.write_bytes(json.dumps(message("m1")).encode() + b"\n" + b'{"id": "m2"')  # still being written
    records, damaged = SpoolLog().read([one, two])
    assert [r["id"] for r in records] == ["m1"]
    assert damaged == [Damaged(one, 2, "not JSON (a write cut short?)")]
    assert damaged[0].note() == f"damaged line 2 in {one} (skipped): not JSON (a write cut short?)"


def test_a_torn_last_line_in_a_rotated_generation_is_damage(tmp_path: Path) -> None:
    current = tmp_path / "inbox.ndjson"
    current.write_bytes(b"")
    (tmp_path / "inbox.ndjson.1").write_bytes(json.dumps(message("m1")).encode() + b"\n" + b'{"id": "m')
    records, damaged = SpoolLog().read([current])
    assert [r["id"] for r in records] == ["m1"]
    assert damaged == [Damaged(tmp_path / "inbox.ndjson.1", 2, "cut short (no newline)")]
