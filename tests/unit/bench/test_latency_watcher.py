"""bench/latency.py's spool watcher, both ways it looks: each id is seen once, with the time it
was first read, and the idle watcher (inotify) wakes on a write instead of looking every 0.2 ms.
(The bench itself is run by hand, not by the suite.)"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from types import ModuleType

import pytest

from tests.unit.bench.scripts import load_bench

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="inotify is Linux's")


@pytest.fixture(scope="module")
def latency() -> ModuleType:
    return load_bench("latency")


def _append(path: Path, *ids: str) -> None:
    with path.open("a") as f:
        f.writelines(json.dumps({"id": i, "text": "x"}) + "\n" for i in ids)


def _wait_for(watcher: object, ids: set[str], within: float = 30.0) -> None:
    deadline = time.monotonic() + within
    with watcher.arrived:  # type: ignore[attr-defined]
        while not ids <= watcher.seen.keys():  # type: ignore[attr-defined]
            assert time.monotonic() < deadline, f"not seen: {ids - watcher.seen.keys()}"  # type: ignore[attr-defined]
            watcher.arrived.wait(0.1)  # type: ignore[attr-defined]


@pytest.mark.parametrize("idle", [False, True])
def test_the_watcher_sees_each_line_once_with_when_it_was_first_read(
        latency: ModuleType, tmp_path: Path, idle: bool) -> None:
    spool = tmp_path / "inbox.ndjson"
    watcher = latency.SpoolWatcher(spool, idle)
    watcher.start()
    try:
        _append(spool, "a", "b")
        _wait_for(watcher, {"a", "b"})
        first = dict(watcher.seen)
        _append(spool, "a", "c")  # a second copy of "a" keeps its first time
        _wait_for(watcher, {"c"})
        assert watcher.seen["a"] == first["a"] and watcher.seen["b"] == first["b"]
        assert watcher.seen["c"] >= first["b"]
    finally:
        watcher.stopped.set()
        watcher.join(10)
    assert not watcher.is_alive()


def test_file_changes_wake_on_a_write_in_the_folder_and_time_out_without_one(
        latency: ModuleType, tmp_path: Path) -> None:
    changes = latency.FileChanges.watch(tmp_path)
    try:
        assert not _readable(changes.fd)
        (tmp_path / "spool.ndjson").write_text("{}\n")
        assert _readable(changes.fd)
        changes.wait(5.0)  # returns at once, and drains what the write raised
        assert not _readable(changes.fd)
        changes.wait(0.01)  # nothing written: the timeout ends it, and nothing is left to read
        assert not _readable(changes.fd)
    finally:
        changes.close()


def test_watching_a_missing_folder_is_a_bench_error(latency: ModuleType, tmp_path: Path) -> None:
    with pytest.raises(latency.BenchError, match="cannot watch"):
        latency.FileChanges.watch(tmp_path / "gone")


def _readable(fd: int) -> bool:
    import select

    return bool(select.select([fd], [], [], 0)[0])


def test_each_message_is_timed_from_its_return_and_from_its_start(latency: ModuleType) -> None:
    S = latency.Sample
    push = [S(0.0, 0.001, 0.0015), S(1.0, 1.002, 1.0015), S(2.0, 2.001, 2.003)]  # the second: in before
    poll = [S(0.0, 0.001, 0.401), S(1.0, 1.001, 1.201)]
    floor = [S(0.0, 0.0004, 0.0005), S(1.0, 1.0004, 1.0006), S(2.0, 2.0004, 2.0007)]
    out = latency.summarize(push, poll, floor)
    assert out["p50_ms"] == 0.5 and out["send_p50_ms"] == 1.5
    assert out["floor_p50_ms"] == 0.6 and out["vs_floor"] == 2.5 and out["over_floor_ms"] == 0.9
    assert out["before_return"] == 0.33  # a line in the spool before its send returned counts 0 ms after
    assert out["poll_p50_ms"] == 301.0 and out["ratio"] == round(301.0 / 1.5, 1)
    assert out["messages"] == 3
