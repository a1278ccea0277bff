"""Who is at the other end of a local TCP socket: the listener's pid, and the owner of a connection.

Linux only (/proc/net/tcp{,6} and /proc/<pid>/fd); elsewhere, or for another user's process,
no pid is found and the caller falls back. `peer_owner` reads the uid the kernel records for
the socket at the other end of a connection: the one a server accepted from its listener, so
its owner is the listener's, whoever listens there now. `listening_inodes` and
`connection_owner` are the pure parts.
"""

from __future__ import annotations

import ipaddress
import os
import socket
from pathlib import Path

__all__ = ["connection_owner", "listening_inodes", "peer_owner", "pid_listening_on"]

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


IP = ipaddress.IPv4Address | ipaddress.IPv6Address
Address = tuple[IP, int]


def _address(field: str) -> Address:
    """A table's "HEX:PORT": the address is its bytes in 32-bit words of host (little-endian) order."""
    hex_ip, hex_port = field.rsplit(":", 1)
    raw = b"".join(bytes.fromhex(hex_ip[i:i + 8])[::-1] for i in range(0, len(hex_ip), 8))
    return _plain(ipaddress.ip_address(raw)), int(hex_port, 16)


def _plain(ip: IP) -> IP:
    """An IPv4-mapped IPv6 address (a dual-stack server's view of an IPv4 client) as IPv4."""
    mapped = ip.ipv4_mapped if isinstance(ip, ipaddress.IPv6Address) else None
    return mapped or ip


def connection_owner(tables: list[str], local: Address, peer: Address) -> int | None:
    """The uid owning the socket whose local end is `peer` and remote end is `local`: the other
    end of our connection from `local` to `peer`, when it is on this machine; else None."""
    for table in tables:
        for line in table.splitlines()[1:]:
            fields = line.split()
            if len(fields) < 10 or fields[3] == LISTEN:
                continue
            try:
                if _address(fields[1]) == peer and _address(fields[2]) == local:
                    return int(fields[7])
            except ValueError:
                continue
    return None


def _endpoint(sockaddr: tuple[str, int] | tuple[str, int, int, int]) -> Address:
    return _plain(ipaddress.ip_address(sockaddr[0].split("%", 1)[0])), int(sockaddr[1])


def peer_owner(sock: socket.socket) -> int | None:
    """The uid owning the other end of the connected TCP socket `sock`, or None when that end is
    not on this machine (or /proc/net is not there to say)."""
    return connection_owner(_tables(), _endpoint(sock.getsockname()), _endpoint(sock.getpeername()))


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
