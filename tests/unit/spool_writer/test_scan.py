"""spool_writer.scan: every copy of every message once, then only the new, moving no cursor."""

from __future__ import annotations

import os
from pathlib import Path

from spool_writer.scan import SpoolScan
from spool_writer.sessions import register
from spool_writer.spool import Spool
from tests.unit.samples import hexid, spool_message


def test_a_scan_gives_each_message_once_across_inbox_and_session_copies(tmp_path: Path) -> None:
    root = tmp_path / "spool"
    spool = Spool(root)
    spool.deliver(spool_message(hexid(1)))
    scan = SpoolScan(root)
    assert [r["id"] for r in scan.new()] == [hexid(1)]
    register(root, "other", "s1", os.getpid())  # takes the inbox's message over: seen already
    register(root, "other", "s2", os.getpid())
    spool.deliver(spool_message(hexid(2)))
    assert [r["id"] for r in scan.new()] == [hexid(2)]
    assert scan.new() == []
    assert not list((root / "sessions").glob("*.cursor"))  # no reader's position was touched


def test_a_missing_spool_is_empty(tmp_path: Path) -> None:
    assert SpoolScan(tmp_path / "nothing").new() == []
