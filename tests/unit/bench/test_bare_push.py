"""bench/bare_push.py, the floor `bench/latency.py` times talk against: its relay hands each
deposit to the mailbox's stream, and its follower writes one line per message, under the id the
sender waits for. (The bench itself is run by hand, not by the suite.)"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from types import ModuleType

import pytest

from follower.relay.client import RelayClient
from tests.unit.bench.scripts import load_bench

FP, TAG = "ab" * 16, "cd" * 16


@pytest.fixture(scope="module")
def bare() -> ModuleType:
    return load_bench("bare_push")


def test_each_deposit_reaches_the_bare_followers_file_once_under_its_line_id(
        bare: ModuleType, tmp_path: Path) -> None:
    pipeline = bare.BarePipeline(FP, tmp_path / "lines.ndjson", tmp_path / "bare.log")
    pipeline.start(bare.Deadline(60))
    started = list(pipeline.procs)
    try:
        with RelayClient(pipeline.url) as client:
            first = os.urandom(300)
            deadline = time.monotonic() + 30
            # Until the follower's stream is up, a deposit reaches nobody: send the first again.
            while bare.line_id(first) not in _lines(pipeline.out):
                assert time.monotonic() < deadline, pipeline.log_tail()
                client.deposit(FP, TAG, first)
                time.sleep(0.2)
            second = os.urandom(300)
            assert client.deposit(FP, TAG, second).isdigit()
            while bare.line_id(second) not in _lines(pipeline.out):
                assert time.monotonic() < deadline, pipeline.log_tail()
                time.sleep(0.01)
    finally:
        pipeline.stop()
    assert _lines(pipeline.out).count(bare.line_id(second)) == 1
    assert len(started) == 2 and all(proc.poll() is not None for proc in started)  # stop left none


def _lines(path: Path) -> list[str]:
    try:
        return [json.loads(line)["id"] for line in path.read_text().splitlines()]
    except FileNotFoundError:
        return []
