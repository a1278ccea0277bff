"""pi's door without pi: which records it prints, when the cursor moves, and the NDJSON both
sides speak, over a real spool and cursor."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from alarms.hosts.pi.door import Door, Known, Lines, batch_line, batch_of, covered
from alarms.mailbox import SessionMail
from spool_writer import lines
from spool_writer.cursor import CursorReader
from spool_writer.sessions import register
from tests.unit.samples import handed_lines, spool_message

SID = "01a2355c-8f79-730d-93fe-0c3d741530e4"


def test_only_what_nobody_printed_queued_or_delivered_is_printed() -> None:
    records = [spool_message(i) for i in ("a", "b", "c", "d")]
    known = Known(delivered={"a"}, queued={"b"}, printed={"c"})
    assert [r["id"] for r in batch_of(records, known)] == ["d"]


def test_the_cursor_passes_records_only_when_every_one_was_delivered() -> None:
    records = [spool_message("a"), spool_message("b")]
    assert not covered(records, Known(delivered={"a"}, queued={"b"}))
    assert covered(records, Known(delivered={"a", "b"}))


def test_the_extension_moves_ids_from_queued_to_delivered_and_bad_lines_change_nothing() -> None:
    known = Known()
    known.update({"queued": ["a", "b"]})
    known.update({"delivered": ["a"], "queued": "not a list"})
    known.update({"delivered": [1, None]})
    assert known.delivered == {"a"} and known.queued == {"b"}


def test_a_batch_line_is_one_ascii_line_holding_the_framed_text() -> None:
    record = spool_message("m1")
    record["text"] = "one\u2028two\nthree"
    line = batch_line([record])
    assert "\n" not in line and line.isascii()
    obj = json.loads(line)
    assert obj["ids"] == ["m1"] and "from alice" in obj["text"] and "> three" in obj["text"]


@pytest.fixture
def mail(folder: Path) -> SessionMail:
    register(folder / "spool", "pi", SID, os.getpid())
    return SessionMail(folder, SID)


def append(mail: SessionMail, *ids: str) -> None:
    with mail.layout.session_file(SID).open("ab") as f:
        for i in ids:
            f.write(lines.encode(spool_message(i)))


def unread(mail: SessionMail) -> int:
    return CursorReader(mail.layout.session_file(SID), mail.layout.cursor_file(SID)).count_unread()


def test_a_batch_is_printed_once_and_the_cursor_moves_only_on_delivery(mail: SessionMail) -> None:
    printed: list[str] = []
    door = Door(mail, printed.append)
    append(mail, "m1", "m2")
    door.step()
    door.step()
    assert [json.loads(p)["ids"] for p in printed] == [["m1", "m2"]]
    assert unread(mail) == 2
    door.known.update({"queued": ["m1", "m2"]})
    door.known.update({"delivered": ["m1"]})
    door.step()
    assert unread(mail) == 2  # m2 is not in a model request yet
    append(mail, "m3")
    door.known.update({"delivered": ["m2"]})
    door.step()
    assert [json.loads(p)["ids"] for p in printed] == [["m1", "m2"], ["m3"]]
    assert unread(mail) == 3
    assert not mail.layout.handed.exists() or handed_lines(mail.layout.handed) == []  # no receipt yet
    door.known.update({"delivered": ["m3"]})
    door.step()
    assert unread(mail) == 0
    assert [h["id"] for h in handed_lines(mail.layout.handed)] == ["m1", "m2", "m3"]
    assert door.known == Known()


def test_a_door_started_again_prints_nothing_the_extension_holds(mail: SessionMail) -> None:
    append(mail, "m1", "m2", "m3")
    first: list[str] = []
    Door(mail, first.append).step()  # printed m1..m3, then killed before any acknowledgement
    again: list[str] = []
    door = Door(mail, again.append)
    door.known.update({"delivered": ["m1"], "queued": ["m2"]})  # the extension's first line
    door.step()
    assert [json.loads(p)["ids"] for p in again] == [["m3"]]
    door.known.update({"delivered": ["m2", "m3"]})
    door.step()
    assert unread(mail) == 0 and [json.loads(p)["ids"] for p in again] == [["m3"]]


def test_lines_are_read_whole_across_reads_and_eof_closes(tmp_path: Path) -> None:
    read_end, write_end = os.pipe()
    reader = Lines(read_end)
    os.write(write_end, b'{"queued": ["a"]}\nnot json\n{"deliv')
    assert reader.read(1.0) == [{"queued": ["a"]}]
    os.write(write_end, b'ered": ["a"]}\n')
    assert reader.read(1.0) == [{"delivered": ["a"]}]
    os.close(write_end)
    assert reader.read(1.0) == [] and reader.closed
    os.close(read_end)
