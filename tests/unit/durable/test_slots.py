"""durable.slots: a state file rewritten in place, read whole after a torn write or a kill."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from durable import slots
from durable.errors import LocalFileRefused
from durable.slots import MAGIC, MIN_SLOT, Slotted, holds, read_slots, read_slotted_json, write_slots
from tests.conftest import open_paths, wait_for

ROOT = Path(__file__).resolve().parents[3]


def where(at: Slotted | None) -> tuple[bytes, int, int, int] | None:
    """Which state, and where it lies: not how far a write must zero (`Slotted.spans`), which a
    writer knows of its own writes and a reader does not."""
    return None if at is None else (at.payload, at.counter, at.slot, at.size)


def test_writes_alternate_between_the_slots_and_the_newest_is_read(tmp_path: Path) -> None:
    path = tmp_path / "state"
    assert read_slots(path) is None
    at = write_slots(path, b"one", None)
    assert (at.slot, at.counter, at.size) == (0, 1, MIN_SLOT)
    size = path.stat().st_size
    for n, text in enumerate([b"two", b"three", b"four"], start=2):
        at = write_slots(path, text, at)
        assert at.counter == n and at.slot == (n - 1) % 2
        assert where(read_slots(path)) == where(at)
    assert path.stat().st_size == size and path.stat().st_mode & 0o777 == 0o600  # in place


@pytest.mark.parametrize("torn", ["the newest", "both"])
def test_a_torn_write_leaves_the_state_before_it(tmp_path: Path, torn: str) -> None:
    path = tmp_path / "state"
    before = write_slots(path, b"before", None)
    after = write_slots(path, b"after", before, sync=False)  # torn before it was synced: nothing wiped
    data = bytearray(path.read_bytes())
    head = len(MAGIC) + 4
    data[head + after.slot * after.size + 30] ^= 0xFF  # a byte of the newest payload
    if torn == "both":
        data[head + before.slot * before.size + 30] ^= 0xFF
    path.write_bytes(bytes(data))
    if torn == "both":
        with pytest.raises(ValueError, match="neither copy"):
            read_slots(path)
    else:
        assert where(read_slots(path)) == where(before)


def test_a_synced_write_leaves_no_byte_of_the_states_before_it(tmp_path: Path) -> None:
    """A write without a sync keeps the state before it (a power loss falls back to it); once a
    write is synced it is copied over the other slot, and no byte of an earlier state is left,
    not even the tail of a longer one."""
    path = tmp_path / "state"
    at = write_slots(path, b"the first state, longer than the rest", None)
    at = write_slots(path, b"the second state", at, sync=False)
    assert b"the first state" in path.read_bytes()
    at = write_slots(path, b"the third", at)
    data = path.read_bytes()
    assert b"first" not in data and b"second" not in data and b"longer than the rest" not in data
    assert data.count(b"the third") == 2 and where(read_slots(path)) == where(at) and holds(path, at)
    after = write_slots(path, b"the fourth", at, sync=False)  # over the copy: the third is the fallback
    torn = bytearray(path.read_bytes())
    assert torn.count(b"the third") == 1 and where(read_slots(path)) == where(after) and not holds(path, at)
    torn[len(MAGIC) + 4 + after.slot * after.size + 30] ^= 0xFF
    path.write_bytes(bytes(torn))
    assert where(read_slots(path)) == where(at)


def test_a_write_zeroes_only_as_far_as_a_state_before_it_reached(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """A short state does not rewrite its whole slot, yet no tail of a longer one stays behind:
    the writer knows how far its own last write there reached, and zeroes the whole slot of a
    file it only read (another process may have written anything there)."""
    path = tmp_path / "state"
    long = b"a long state that holds keys " * 40
    at = write_slots(path, long, None)
    at = write_slots(path, long, at)  # both slots hold it now
    written: list[int] = []
    pwrite = os.pwrite

    def counted(fd: int, data: bytes, offset: int) -> int:
        written.append(len(data))
        return pwrite(fd, data, offset)

    monkeypatch.setattr(os, "pwrite", counted)
    at = write_slots(path, b"short", at, sync=False)
    at = write_slots(path, b"short", at)  # and its copy over the other slot
    assert b"holds keys" not in path.read_bytes()
    # As far as the long state reached in each slot, not the whole slot; the copy's slot was
    # zeroed past the short state by the write before.
    assert written == [len(long) + 28, len(long) + 28, 5 + 28]
    written.clear()
    at = write_slots(path, b"short", at, sync=False)
    assert written == [5 + 28]  # nothing longer was there
    written.clear()
    write_slots(path, b"short", read_slots(path), sync=False)  # as read, not as written: the whole slot
    assert written == [MIN_SLOT]


def test_a_state_that_outgrows_its_slot_lays_the_file_out_anew(tmp_path: Path) -> None:
    path = tmp_path / "state"
    at = write_slots(path, b"small", None)
    big = b"x" * (3 * MIN_SLOT)
    at = write_slots(path, big, at)
    assert at.size > len(big) and where(read_slots(path)) == where(at) and at.counter == 2
    assert write_slots(path, b"small again", at).size == at.size  # slots never shrink


def test_a_file_an_earlier_version_wrote_whole_reads_as_one_state(tmp_path: Path) -> None:
    path = tmp_path / "state"
    path.write_bytes(b'{"v": 1}')
    old = read_slots(path)
    assert old is not None and (old.payload, old.slot) == (b'{"v": 1}', -1)
    at = write_slots(path, b'{"v": 2}', old)
    assert path.read_bytes().startswith(MAGIC) and where(read_slots(path)) == where(at)


WRITER = """
import json, sys
from pathlib import Path
from durable.slots import read_slots, write_slots
path = Path(sys.argv[1])
at = read_slots(path)
while True:
    n = at.counter + 1 if at else 1
    at = write_slots(path, json.dumps({"n": n, "pad": "y" * (n * 37 % 6000)}).encode(), at)
"""


def test_a_writer_killed_at_any_moment_leaves_a_whole_state_and_readers_never_see_half(
        tmp_path: Path) -> None:
    """A real kill -9 in a loop of writes (one of them grows the file past its first slots),
    while this process reads without a lock."""
    path = tmp_path / "state"
    for _ in range(3):
        child = subprocess.Popen([sys.executable, "-c", WRITER, str(path)], cwd=ROOT)
        try:
            start = read_slots(path)
            goal = (start.counter if start else 0) + 200

            def whole_and_past_goal(goal: int = goal) -> bool:
                found = read_slots(path)
                if found is None:
                    return False
                assert json.loads(found.payload)["n"] == found.counter  # never half of one
                return found.counter >= goal

            wait_for(whole_and_past_goal, 120, "the writer's states")
        finally:
            os.kill(child.pid, signal.SIGKILL)
            child.wait()
        found = read_slots(path)
        assert found is not None and json.loads(found.payload)["n"] == found.counter >= goal


def test_holds_tells_from_the_headers_whether_a_state_is_still_the_newest(tmp_path: Path) -> None:
    path = tmp_path / "state"
    first = write_slots(path, b"first", None)
    assert holds(path, first)
    second = write_slots(path, b"second", first)
    assert not holds(path, first) and holds(path, second)
    data = bytearray(path.read_bytes())
    head = len(MAGIC) + 4
    data[head + first.slot * first.size + 7] = 99  # a torn write began in the other slot
    path.write_bytes(bytes(data))
    assert not holds(path, second) and where(read_slots(path)) == where(second)
    path.write_bytes(b'{"v": 1}')  # put in its place whole
    assert not holds(path, second)
    path.unlink()
    assert not holds(path, second)


def test_read_slotted_json_gives_the_state_and_where_it_lies_or_says_what_to_do(tmp_path: Path) -> None:
    path = tmp_path / "state"
    assert read_slotted_json(path, {}) == ({}, None)
    path.write_text('{"whole": 1}')  # as an earlier version wrote it: the next write lays it out
    state, at = read_slotted_json(path, None)
    assert state == {"whole": 1} and at is not None and at.slot == -1
    at = write_slots(path, b'{"n": 2}', at, sync=False)
    state, read = read_slotted_json(path, None)
    assert state == {"n": 2} and where(read) == where(at)
    write_slots(path, b"not json", at, sync=False)
    with pytest.raises(LocalFileRefused, match=r"state in .* is damaged or unreadable .*move it aside"):
        read_slotted_json(path, None)
    link = tmp_path / "link"
    link.symlink_to(path)
    with pytest.raises(LocalFileRefused, match="symbolic link"):
        read_slotted_json(link, None)


@pytest.fixture
def no_open_files(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[Path, Any]]:
    """No file kept open by `holds` before the test; those it keeps closed after it."""
    kept: dict[Path, Any] = {}
    monkeypatch.setattr(slots, "_OPEN", kept)
    yield kept
    for fd, *_ in kept.values():
        os.close(fd)


def test_a_write_after_holds_goes_to_the_file_now_at_the_path_not_one_moved_aside(
        tmp_path: Path, no_open_files: dict[Path, Any]) -> None:
    path = tmp_path / "state"
    at = write_slots(path, b"first", None)
    assert holds(path, at)  # the file is kept open from here
    at = write_slots(path, b"second", at, sync=False, held=True)
    assert read_slots(path).payload == b"second"  # type: ignore[union-attr]
    # The folder restored from a copy, say: the same bytes, in another file at the same path.
    aside = tmp_path / "aside"
    path.rename(aside)
    path.write_bytes(aside.read_bytes())
    assert holds(path, at)
    write_slots(path, b"third", at, sync=False, held=True)
    assert read_slots(path).payload == b"third"  # type: ignore[union-attr]
    assert read_slots(aside).payload == b"second"  # type: ignore[union-attr]


def test_files_kept_open_for_writers_stay_few(tmp_path: Path, no_open_files: dict[Path, Any]) -> None:
    paths = [tmp_path / f"peer{i}" for i in range(3 * slots.OPEN_MOST)]
    for path in paths:
        assert holds(path, write_slots(path, b"state", None))
    assert len(no_open_files) == slots.OPEN_MOST
    assert sum(str(p) in open_paths() for p in paths) == slots.OPEN_MOST


def test_threads_writing_many_files_through_kept_descriptors_never_write_into_each_others(
        tmp_path: Path, no_open_files: dict[Path, Any]) -> None:
    # More files than are kept open: threads close each other's descriptors to make room, and a
    # descriptor's number is reused at once; written through the wrong one, a state would land in
    # another file.
    failed: list[BaseException] = []

    def writer(t: int) -> None:
        try:
            write(t)
        except BaseException as exc:  # told to the test, not lost in the thread
            failed.append(exc)

    def write(t: int) -> None:
        states = {}
        for i in range(8):
            path = tmp_path / f"t{t}-{i}"
            states[path] = write_slots(path, f"{path.name} 0".encode(), None)
        for n in range(1, 150):
            for path, at in states.items():
                assert holds(path, at)
                states[path] = write_slots(path, f"{path.name} {n}".encode(), at, sync=False, held=True)

    threads = [threading.Thread(target=writer, args=(t,)) for t in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not failed
    for t in range(4):
        for i in range(8):
            assert read_slots(tmp_path / f"t{t}-{i}").payload == f"t{t}-{i} 149".encode()  # type: ignore[union-attr]


def test_holds_says_no_rather_than_fail_when_the_file_cannot_be_opened_to_write(
        tmp_path: Path, no_open_files: dict[Path, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    # A file made read-only (root, as tests often run, may write it all the same): the writer
    # reads it whole instead, and its write is what reports the refusal, as before it was kept.
    path = tmp_path / "state"
    at = write_slots(path, b"state", None)

    def refused(*_: Any) -> int:
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr(slots, "open_private", refused)
    assert not holds(path, at) and not no_open_files
