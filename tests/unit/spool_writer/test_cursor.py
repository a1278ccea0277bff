"""spool_writer.cursor: each spool line handed on once, through half lines, rewrites and rotation."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

import spool_writer.handed as handed
from spool_writer import lines
from spool_writer.cursor import (
    Chunk,
    CursorReader,
    CursorState,
    FileView,
    Read,
    advance,
    head_hash,
    load_state,
    plan,
    resume_at,
)
from spool_writer.layout import SpoolLayout, oldest_first
from spool_writer.record import SpoolRecord
from spool_writer.sessions import register
from spool_writer.spool import Spool
from tests.conftest import REPO
from tests.unit.samples import FP_A, FP_B, handed_lines, spool_message

ENV = {**os.environ, "PYTHONPATH": str(REPO)}


def line(msg_id: str, text: str = "hi") -> bytes:
    return lines.encode({"id": msg_id, "from": "f" * 32, "name": "alice", "text": text,
                         "ts": "2024-01-01T00:00:00Z", "kind": "chat"})


def view(inode: int, data: bytes) -> FileView:
    return FileView(inode, len(data), data[:64])


def state_at(inode: int, data: bytes, offset: int, recent: tuple[str, ...] = ()) -> CursorState:
    head = data[:min(64, offset)]
    return CursorState(inode, offset, len(head), head_hash(head), recent)


def ids(records: list[SpoolRecord]) -> list[str]:
    return [r["id"] for r in records]


# The pure core: values in, values out.

def test_plan_resumes_where_the_cursor_is() -> None:
    data = line("a") + line("b")
    assert plan(state_at(7, data, len(line("a"))), [view(7, data)]) == [Read(0, len(line("a")))]


def test_plan_after_rotation_finishes_the_old_generation_then_reads_the_newer_files() -> None:
    old, mid, cur = line("a") + line("b"), line("c"), line("d")
    views = [view(1, old), view(2, mid), view(3, cur)]
    assert plan(state_at(1, old, len(line("a"))), views) == [Read(0, len(line("a"))), Read(1, 0), Read(2, 0)]


def test_plan_reads_everything_for_a_new_cursor_or_a_lost_generation() -> None:
    views = [view(2, line("c")), view(3, line("d"))]
    assert plan(CursorState(), views) == [Read(0, 0), Read(1, 0)]
    assert plan(state_at(1, line("a"), 10), views) == [Read(0, 0), Read(1, 0)]


def test_resume_at_sees_truncation_and_a_refill_of_the_same_length() -> None:
    data = line("a") + line("b")
    state = state_at(5, data, len(data))
    assert resume_at(state, view(5, data)) == len(data)
    assert resume_at(state, view(5, line("a"))) == 0  # truncated
    refill = line("x") + line("y")
    assert len(refill) == len(data)
    assert resume_at(state, view(5, refill)) == 0


def test_advance_leaves_a_half_line_for_the_next_read() -> None:
    data = line("a") + line("b")[:10]
    taken = advance(CursorState(), [Chunk(data, 0, True)], view(1, data))
    assert ids(taken.records) == ["a"]
    assert taken.state.offset == len(line("a"))
    assert taken.state.head_len == min(64, len(line("a")))  # only bytes before the offset


def test_advance_skips_malformed_lines_and_ids_already_handed_on() -> None:
    data = line("a") + b"not json\n" + b"[1, 2]\n" + b'{"no": "id"}\n' + line("b") + line("c")
    taken = advance(CursorState(recent=("b",)), [Chunk(data, 0, True)], view(1, data))
    assert ids(taken.records) == ["a", "c"]
    assert taken.skipped == 3 and taken.state.skipped == 3
    assert taken.state.recent == ("b", "a", "c")
    assert taken.lines == [line("a"), line("c")]


def test_advance_keeps_only_the_last_n_ids() -> None:
    data = b"".join(line(str(i)) for i in range(10))
    taken = advance(CursorState(), [Chunk(data, 0, True)], view(1, data), keep=4)
    assert taken.state.recent == ("6", "7", "8", "9")


def test_a_torn_line_in_an_old_generation_is_skipped_not_waited_for() -> None:
    old, cur = line("a") + b'{"id": "tor', line("b")
    taken = advance(CursorState(), [Chunk(old, 0, False), Chunk(cur, 0, True)], view(2, cur))
    assert ids(taken.records) == ["a", "b"] and taken.skipped == 1
    assert (taken.state.inode, taken.state.offset) == (2, len(cur))


# The reader on real files.

def reader(tmp_path: Path) -> tuple[Path, CursorReader]:
    spool_file = tmp_path / "s.ndjson"
    return spool_file, CursorReader(spool_file, tmp_path / "s.cursor")


def test_take_hands_each_line_on_once_and_a_half_line_waits(tmp_path: Path) -> None:
    spool_file, r = reader(tmp_path)
    assert r.take() == []  # no spool yet
    spool_file.write_bytes(line("a") + line("b")[:15])
    assert ids(r.take()) == ["a"]
    assert r.take() == []
    with open(spool_file, "ab") as f:
        f.write(line("b")[15:] + line("c"))
    assert ids(r.take()) == ["b", "c"]
    assert r.take() == []


def test_the_cursor_is_saved_before_take_returns(tmp_path: Path) -> None:
    spool_file, r = reader(tmp_path)
    spool_file.write_bytes(line("a"))
    r.take()
    state = load_state(tmp_path / "s.cursor")
    assert (state.inode, state.offset, state.recent) == (spool_file.stat().st_ino, len(line("a")), ("a",))
    assert CursorReader(spool_file, tmp_path / "s.cursor").take() == []  # a new process: nothing twice


def test_a_spool_truncated_and_refilled_to_the_same_length_is_read_again(tmp_path: Path) -> None:
    spool_file, r = reader(tmp_path)
    spool_file.write_bytes(line("a") + line("b"))
    assert ids(r.take()) == ["a", "b"]
    with open(spool_file, "r+b") as f:  # same inode, same length, new content
        f.truncate(0)
        f.write(line("c") + line("d"))
    assert ids(r.take()) == ["c", "d"]


def test_a_truncated_spool_is_read_from_the_start_without_repeats(tmp_path: Path) -> None:
    spool_file, r = reader(tmp_path)
    spool_file.write_bytes(line("a") + line("b"))
    r.take()
    with open(spool_file, "r+b") as f:
        f.truncate(0)
        f.write(line("a") + b"garbage\n")
    assert r.take() == []  # "a" was handed on already; the garbage is counted and passed over
    assert load_state(tmp_path / "s.cursor").skipped == 1


def test_rotation_mid_read_hands_on_the_rest_of_the_old_generation(tmp_path: Path) -> None:
    root = tmp_path / "spool"
    spool = Spool(root, max_bytes=2 * len(line("x")) + 100, generations=5)  # room for 3 lines
    inbox = root / "inbox.ndjson"
    r = CursorReader(inbox, tmp_path / "inbox.cursor")
    spool.deliver(json.loads(line("a")))
    assert ids(r.take()) == ["a"]
    for msg_id in "bcdefg":  # three lines a file: [a b c] [d e f] [g]
        spool.deliver(json.loads(line(msg_id)))
    assert [len(lines.read_lines(p)) for p in oldest_first(inbox)] == [3, 3, 1]  # read file rotated
    assert ids(r.take()) == list("bcdefg")
    spool.deliver(json.loads(line("h")))
    assert ids(r.take()) == ["h"]


READER = """
import sys, time
from pathlib import Path
from spool_writer.cursor import CursorReader
spool_file, state_file, done = map(Path, sys.argv[1:4])
r = CursorReader(spool_file, state_file)
while True:
    finished = done.exists()  # checked before reading: nothing written after it goes unread
    for record in r.take():
        print(record["id"], flush=True)
    if finished:
        break
    time.sleep(0.001)
"""

WRITER = """
import sys
from pathlib import Path
from spool_writer.spool import Spool
root, done = Path(sys.argv[1]), Path(sys.argv[2])
spool = Spool(root, max_bytes=8192, generations=1000)
for i in range(1500):
    spool.deliver({"id": f"m{i}", "from": "f" * 32, "name": "w", "text": "t" * 50,
                   "ts": "2024-01-01T00:00:00Z", "kind": "chat"})
done.touch()
"""


def test_two_readers_and_a_writer_hand_every_id_on_exactly_once(tmp_path: Path) -> None:
    root, done = tmp_path / "spool", tmp_path / "done"
    inbox, state = root / "inbox.ndjson", tmp_path / "shared.cursor"
    writer = subprocess.Popen([sys.executable, "-c", WRITER, str(root), str(done)], env=ENV)
    readers = [subprocess.Popen([sys.executable, "-c", READER, str(inbox), str(state), str(done)],
                                env=ENV, stdout=subprocess.PIPE, text=True) for _ in range(2)]
    assert writer.wait(timeout=120) == 0
    outputs = [p.communicate(timeout=120)[0].split() for p in readers]
    assert all(p.returncode == 0 for p in readers)
    counts = Counter(outputs[0] + outputs[1])
    assert counts == Counter(f"m{i}" for i in range(1500))  # every id once, across both readers
    assert all(outputs)  # both took a share: they really ran side by side
    assert len(lines.read_lines(inbox)) < 1500  # and the writer rotated under them


# spool_writer.cursor with a hand-over log.


def session_reader(root: Path, sid: str) -> CursorReader:
    layout = SpoolLayout(root)
    return CursorReader(layout.session_file(sid), layout.cursor_file(sid), handed=layout.handed, sid=sid)


def test_take_logs_each_taken_message_in_the_hand_over_log(tmp_path: Path) -> None:
    root = tmp_path / "spool"
    register(root, "other", "s1", os.getpid())
    spool = Spool(root)
    assert spool.deliver(spool_message("m1"))
    assert spool.deliver(spool_message("m2", FP_B))
    reader = session_reader(root, "s1")
    taken = reader.take()
    assert [r["id"] for r in taken] == ["m1", "m2"]
    log = SpoolLayout(root).handed
    assert [(x["id"], x["from"], x["sid"]) for x in handed_lines(log)] == [("m1", FP_A, "s1"),
                                                                          ("m2", FP_B, "s1")]
    assert reader.take() == []
    assert len(handed_lines(log)) == 2
    spool.deliver(spool_message("m3"))
    assert [r["id"] for r in reader.take()] == ["m3"]
    assert [x["id"] for x in handed_lines(log)] == ["m1", "m2", "m3"]


def test_take_writes_the_hand_over_log_before_it_moves_the_cursor(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "spool"
    register(root, "other", "s1", os.getpid())
    Spool(root).deliver(spool_message("m1"))
    reader = session_reader(root, "s1")

    def broken(log: Path, records: list[SpoolRecord], sid: str) -> None:
        raise OSError("disk full")

    with monkeypatch.context() as patch:
        patch.setattr(handed, "record", broken)  # the module the cursor calls
        with pytest.raises(OSError, match="disk full"):
            reader.take()
    assert [r["id"] for r in reader.take()] == ["m1"]  # not lost: the cursor had not moved
    assert [x["id"] for x in handed_lines(SpoolLayout(root).handed)] == ["m1"]


def test_take_without_a_hand_over_log_writes_none(tmp_path: Path) -> None:
    root = tmp_path / "spool"
    register(root, "other", "s1", os.getpid())
    Spool(root).deliver(spool_message("m1"))
    layout = SpoolLayout(root)
    reader = CursorReader(layout.session_file("s1"), layout.cursor_file("s1"))
    assert [r["id"] for r in reader.take()] == ["m1"]
    assert not layout.handed.exists()


