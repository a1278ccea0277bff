"""Qwen Code's registry of live sessions, `$QWEN_HOME/sessions/<pid>.json`, read by the Qwen door.

A record is a self-report any process of the user can write, so each one is checked before it
is used, as Qwen's own protocol page asks: the file name's pid equals `pid`; `pidNs` equals ours;
`procStart` (`<boot id>:<start ticks>`) names this boot and the start ticks of the process now
holding that pid (a reused pid has other ticks); `ipcPath` is an absolute socket path that fits
a socket address; `ipcToken` is 64 hex digits; `sessionId` is a bounded one-line string. Only
`tui` sessions are written to: an ACP-driven session (`serve`, `headless`) refuses peer messages,
and an `external` record is another program like this one.

`parse_record` and `is_live` decide from values alone; `scan` is the I/O around them.
"""

from __future__ import annotations

import json
import os
import re
import stat
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from spool_writer import process

__all__ = ["qwen_home"]

SCHEMA_VERSION = 1
MAX_RECORD_BYTES = 64 * 1024
MAX_SOCKET_PATH_BYTES = 107  # sun_path holds 108 bytes with the terminating NUL
TARGET_KINDS = ("tui",)
_FILE = re.compile(r"([1-9][0-9]{0,9})(?:-[0-9a-f]{8})?\.json")
_TOKEN = re.compile(r"[0-9a-fA-F]{64}")
_PROC_START = re.compile(r"([0-9a-fA-F-]{1,64}):([0-9]{1,20})")
_KIND = re.compile(r"[a-z][a-z0-9-]{0,15}")
_SESSION_ID = re.compile(r"[\x21-\x7e]{1,128}")


@dataclass(frozen=True)
class QwenSession:
    """One live, messageable Qwen Code session, as its record describes it."""

    pid: int
    session_id: str
    ipc_path: str
    ipc_token: str | None
    kind: str
    boot_id: str | None
    start_ticks: int | None
    pid_ns: int | None
    started_at: float


def qwen_home(env: dict[str, str] | None = None) -> Path:
    """QWEN_HOME (a leading ~ expanded, relative to the working folder), else ~/.qwen."""
    env = dict(os.environ) if env is None else env
    value = env.get("QWEN_HOME") or ""
    return Path(value).expanduser().resolve() if value else Path.home() / ".qwen"


def _socket_path(value: object) -> str | None:
    if not isinstance(value, str) or not value.startswith("/") or value.startswith("//"):
        return None
    if any(c in value for c in "\0\n\r") or len(os.fsencode(value)) > MAX_SOCKET_PATH_BYTES:
        return None
    return value


def parse_record(filename: str, raw: bytes) -> QwenSession | None:
    """The session a record file describes, or None when it is unusable, of a newer schema, of
    another kind than a terminal session, or has no inbox."""
    name = _FILE.fullmatch(filename)
    if name is None or len(raw) > MAX_RECORD_BYTES:
        return None
    try:
        obj = json.loads(raw)
    except (ValueError, RecursionError):
        return None
    if not isinstance(obj, dict) or obj.get("schemaVersion") != SCHEMA_VERSION:
        return None
    pid, sid, started = obj.get("pid"), obj.get("sessionId"), obj.get("startedAt")
    if type(pid) is not int or pid != int(name.group(1)):
        return None
    if not isinstance(sid, str) or _SESSION_ID.fullmatch(sid) is None:
        return None
    kind = obj.get("kind", "tui")
    if not isinstance(kind, str) or _KIND.fullmatch(kind) is None or kind not in TARGET_KINDS:
        return None
    path, token = _socket_path(obj.get("ipcPath")), obj.get("ipcToken")
    if path is None or (token is not None and (not isinstance(token, str) or not _TOKEN.fullmatch(token))):
        return None
    boot, ticks = None, None
    start = obj.get("procStart")
    if start is not None:
        found = _PROC_START.fullmatch(start) if isinstance(start, str) else None
        if found is None:
            return None
        boot, ticks = found.group(1).lower(), int(found.group(2))
    ns = obj.get("pidNs")
    if ns is not None and type(ns) is not int:
        return None
    at = float(started) if isinstance(started, int | float) and not isinstance(started, bool) else 0.0
    return QwenSession(pid, sid, path, token, kind, boot, ticks, ns, at)


def is_live(s: QwenSession, own_ns: int | None, own_boot: str | None,
            ticks_of: Callable[[int], int | None]) -> bool:
    """Whether the record's process runs now, in our pid namespace and boot: Qwen's own rule.

    On Linux (`own_ns` known) a record without `pidNs` or `procStart` is never live: without
    them a reused pid cannot be told from the process that wrote the record.
    """
    if own_ns is not None and (s.pid_ns != own_ns or s.start_ticks is None):
        return False
    if s.boot_id is not None and own_boot is not None and s.boot_id != own_boot:
        return False
    ticks = ticks_of(s.pid)
    return ticks is not None and (s.start_ticks is None or ticks == s.start_ticks)


def own_pid_ns() -> int | None:
    try:
        return os.stat("/proc/self/ns/pid").st_ino
    except OSError:
        return None


def own_boot_id() -> str | None:
    try:
        value = Path("/proc/sys/kernel/random/boot_id").read_text().strip().lower()
    except OSError:
        return None
    return value if re.fullmatch(r"[0-9a-f-]{1,64}", value) else None


def _read_record(folder: Path, name: str) -> bytes | None:
    """The file's bytes if it is a regular file (never through a link) of a sane size."""
    try:
        fd = os.open(folder / name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_RECORD_BYTES:
            return None
        return os.read(fd, MAX_RECORD_BYTES + 1)
    except OSError:
        return None
    finally:
        os.close(fd)


def _ticks(pid: int) -> int | None:
    return process.start_time(pid) if process.has_proc() else (0 if process.alive(pid, None) else None)


def scan(home: Path) -> list[QwenSession]:
    """The live terminal sessions under `home`, newest first (one per session id: the newest)."""
    folder = home / "sessions"
    try:
        names = os.listdir(folder)
    except OSError:
        return []
    ns, boot = own_pid_ns(), own_boot_id()
    found: dict[str, QwenSession] = {}
    for name in names:
        raw = _read_record(folder, name) if _FILE.fullmatch(name) else None
        record = parse_record(name, raw) if raw is not None else None
        if record is None or not is_live(record, ns, boot, _ticks):
            continue
        if record.session_id not in found or found[record.session_id].started_at < record.started_at:
            found[record.session_id] = record
    return sorted(found.values(), key=lambda r: -r.started_at)
