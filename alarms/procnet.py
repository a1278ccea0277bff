"""Which process listens on a TCP port: the opencode server's pid, found from its URL.

Linux only (/proc/net/tcp{,6} and /proc/<pid>/fd); elsewhere, or for another user's process,
nothing is found and the caller falls back. `listening_inodes` is the pure part.
"""

from __future__ import annotations

import os
from pathlib import Path

PROC = Path("/proc")
LISTEN = "0A"


def listening_inodes(table: str, port: int) -> set[int]:
    """Socket inodes in a /proc/net/tcp(6) table that listen on `port` (any address)."""
    found: set[int] = set()
    for line in table.splitlines()[1:]:
        fields = line.split()
        if len(fields) < 10 or fields[3] != LISTEN:
            continue
        local_port = int(fields[1].rsplit(":", 1)[1], 16)
        if local_port == port and fields[9] != "0":
            found.add(int(fields[9]))
    return found


def _tables() -> list[str]:
    tables = []
    for name in ("tcp", "tcp6"):
        try:
            tables.append((PROC / "net" / name).read_text())
        except OSError:
            continue
    return tables


def _holds_socket(pid: str, targets: set[str]) -> bool:
    fd_dir = PROC / pid / "fd"
    try:
        names = os.listdir(fd_dir)
    except OSError:
        return False  # gone, or not ours
    for name in names:
        try:
            if os.readlink(fd_dir / name) in targets:
                return True
        except OSError:
            continue
    return False


def pid_listening_on(port: int) -> int | None:
    """The pid of the process listening on `port` on this machine, or None if not found."""
    inodes = set().union(*(listening_inodes(t, port) for t in _tables()))
    if not inodes:
        return None
    targets = {f"socket:[{inode}]" for inode in inodes}
    pids = sorted((p for p in os.listdir(PROC) if p.isdigit()), key=int)
    return next((int(p) for p in pids if _holds_socket(p, targets)), None)
