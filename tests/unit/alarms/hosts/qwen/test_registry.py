"""Qwen Code's registry records, read as the self-reports they are: hostile until checked."""

from __future__ import annotations

import json
import os
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from alarms.hosts.qwen.registry import QwenSession, is_live, parse_record, qwen_home, scan
from spool_writer import process

TOKEN = "ab" * 32


def record(pid: object = 41337, **fields: object) -> bytes:
    base = {"schemaVersion": 1, "pid": pid, "procStart": "0b00-1:8895124", "pidNs": 4026531836,
            "sessionId": "8e016be8-5b48-4c13-ad22-1f5326ae64ac", "cwd": "/p", "name": "p-3f",
            "startedAt": 1788959000000, "qwenVersion": "0.24.4", "kind": "tui",
            "ipcPath": "/run/user/1000/qwen-socks/41337.sock", "ipcToken": TOKEN}
    return json.dumps({**base, **fields}).encode()


def test_a_good_record_is_read() -> None:
    s = parse_record("41337.json", record())
    assert s == QwenSession(41337, "8e016be8-5b48-4c13-ad22-1f5326ae64ac",
                            "/run/user/1000/qwen-socks/41337.sock", TOKEN, "tui", "0b00-1", 8895124,
                            4026531836, 1788959000000.0)
    assert parse_record("41337-0a1b2c3d.json", record()) is not None
    assert parse_record("41337.json", record(kind=None)) is None  # a kind that is not a string
    no_kind = json.loads(record())
    del no_kind["kind"], no_kind["ipcToken"]
    assert parse_record("41337.json", json.dumps(no_kind).encode()) is not None  # an older writer: a tui


def test_records_that_lie_or_cannot_be_written_to_are_skipped() -> None:
    bad = [
        ("41338.json", record()), ("041337.json", record()), ("41337-0A1B2C3D.json", record()),
        ("41337.json.tmp", record()), ("41337.json", record(pid=True)), ("41337.json", record(pid="41337")),
        ("41337.json", record(schemaVersion=2)), ("41337.json", record(kind="serve")),
        ("41337.json", record(kind="external")), ("41337.json", record(kind="headless")),
        ("41337.json", record(ipcPath="relative.sock")), ("41337.json", record(ipcPath="//host/x")),
        ("41337.json", record(ipcPath="/x" * 60)), ("41337.json", record(ipcPath="/a\0b")),
        ("41337.json", record(ipcPath=None)), ("41337.json", record(ipcToken="short")),
        ("41337.json", record(ipcToken=7)), ("41337.json", record(sessionId="")),
        ("41337.json", record(sessionId="a b")), ("41337.json", record(sessionId="x" * 129)),
        ("41337.json", record(procStart="nonsense")), ("41337.json", record(pidNs="1")),
        ("41337.json", b"{"), ("41337.json", b"[]"), ("41337.json", b" " * 70_000),
    ]
    for name, raw in bad:
        assert parse_record(name, raw) is None, (name, raw[:80])


@given(st.binary(max_size=300), st.text(max_size=20))
def test_no_bytes_break_the_record_reader(raw: bytes, name: str) -> None:
    parse_record(name, raw)


def test_liveness_is_qwens_rule() -> None:
    s = parse_record("41337.json", record())
    assert s is not None
    def ticks(pid: int) -> int | None:
        return {41337: 8895124}.get(pid)

    assert is_live(s, 4026531836, "0b00-1", ticks)
    assert not is_live(s, 4026531837, "0b00-1", ticks)  # another pid namespace
    assert not is_live(s, 4026531836, "other-boot", ticks)  # written before a reboot, or elsewhere
    assert not is_live(s, 4026531836, "0b00-1", lambda pid: 1)  # the pid was reused
    assert not is_live(s, 4026531836, "0b00-1", lambda pid: None)  # gone
    unguarded = parse_record("41337.json", record(procStart=None, pidNs=None))
    assert unguarded is not None and not is_live(unguarded, 4026531836, "0b00-1", ticks)
    assert is_live(unguarded, None, None, ticks)  # no /proc: the pid alone is all there is


def test_scan_finds_this_process_and_skips_links_and_the_dead(tmp_path: Path) -> None:
    sessions = tmp_path / "sessions"
    sessions.mkdir()
    me, start = os.getpid(), process.start_time(os.getpid())
    boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    ns = os.stat("/proc/self/ns/pid").st_ino
    good = record(me, procStart=f"{boot}:{start}", pidNs=ns, ipcPath="/tmp/me.sock")
    (sessions / f"{me}.json").write_bytes(good)
    (sessions / f"{me}-0a1b2c3d.json").symlink_to(sessions / f"{me}.json")
    (sessions / "999999.json").write_bytes(record(999999, procStart=f"{boot}:1", pidNs=ns))
    found = scan(tmp_path)
    assert [s.pid for s in found] == [me]
    assert scan(tmp_path / "missing") == []


def test_qwen_home_follows_the_environment(tmp_path: Path) -> None:
    assert qwen_home({"QWEN_HOME": str(tmp_path)}) == tmp_path
    assert qwen_home({}).name == ".qwen"
