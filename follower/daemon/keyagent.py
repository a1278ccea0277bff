"""The follower as a key agent: after `talk unlock`, it holds the key that opens a passphrase-
protected identity, and other commands of the same user take it instead of running the KDF.

What it holds is the key the passphrase derives (argon2id, `keys.keystore.derive_key`), never
the passphrase, and only in this process's memory, for its lifetime at most: `talk lock`, a
stop or a crash forgets it. It is served on a Unix socket in the identity folder (0700, the
socket itself 0600) to a peer whose uid, read from the kernel (SO_PEERCRED), is this process's
own; anyone else is refused before a word is read. A command asks before it would run the KDF;
a key that does not open the identity file is ignored, and a follower that is not running,
not unlocked or not answering costs one failed connect and changes nothing.

The risk is ssh-agent's: while unlocked, any process of this user can use the keys without
the passphrase (it could have read the passphrase file too, where there is one).

One request, one answer, each a JSON object on one line:

    {"op": "key"}                  -> {"key": B64} | {"locked": true}
    {"op": "unlock", "key": B64}   -> {"ok": true} | {"error": WHY}
    {"op": "lock"}                 -> {"ok": true, "was": BOOL}
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import struct
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

__all__ = ["SOCKET_FILE", "KeyAgent", "ask", "peer_is_owner"]

SOCKET_FILE = "follower.sock"
ASK_TIMEOUT_S = 2.0  # a follower that does not answer by then is treated as absent
MAX_LINE = 4096
_UCRED = struct.Struct("3i")  # struct ucred: pid, uid, gid
# sun_path holds 108 bytes with its NUL; a longer path is reached through the folder's fd.
_MAX_PATH = 100

Check = Callable[[bytes], bool]


class Held:
    """The key while unlocked: a bytearray, so that `forget` can overwrite it (best effort: the
    copies a request and a reply made are left to the garbage collector)."""

    def __init__(self) -> None:
        import threading  # the follower's side only: a command asking for the key needs none

        self._key: bytearray | None = None
        self._lock = threading.Lock()

    def get(self) -> bytes | None:
        with self._lock:
            return None if self._key is None else bytes(self._key)

    def set(self, key: bytes) -> None:
        with self._lock:
            self._wipe()
            self._key = bytearray(key)

    def forget(self) -> bool:
        with self._lock:
            was = self._key is not None
            self._wipe()
            return was

    def _wipe(self) -> None:
        if self._key is not None:
            self._key[:] = bytes(len(self._key))
            self._key = None


def answer(request: Any, held: Held, opens: Check) -> dict[str, Any]:
    """The reply to one request (pure but for `held`); `opens` says whether a key opens the
    identity this follower runs."""
    from keys.encoding import b64d, b64e

    op = request.get("op") if isinstance(request, dict) else None
    if op == "key":
        key = held.get()
        return {"locked": True} if key is None else {"key": b64e(key)}
    if op == "unlock":
        try:
            key = b64d(request.get("key"), 32)
        except ValueError:
            return {"error": "malformed key"}
        if not opens(key):
            return {"error": "the key does not open this identity"}
        held.set(key)
        return {"ok": True}
    if op == "lock":
        return {"ok": True, "was": held.forget()}
    return {"error": "unknown request"}


def peer_is_owner(conn: socket.socket, owner: int | None = None) -> bool:
    """Whether the process at the other end of `conn` runs as `owner` (default: our uid), as
    the kernel says. False where it cannot say (no SO_PEERCRED)."""
    option = getattr(socket, "SO_PEERCRED", None)
    if option is None:
        return False
    uid = int(_UCRED.unpack(conn.getsockopt(socket.SOL_SOCKET, option, _UCRED.size))[1])
    return uid == (os.getuid() if owner is None else owner)


@contextlib.contextmanager
def _address(path: Path) -> Iterator[str]:
    """`path` as an AF_UNIX address; a long one through /proc/self/fd and an fd of its folder,
    held open while the address is used (Linux, as SO_PEERCRED is)."""
    if len(os.fsencode(path)) <= _MAX_PATH:
        yield str(path)
        return
    fd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
    try:
        yield f"/proc/self/fd/{fd}/{path.name}"
    finally:
        os.close(fd)


def _read_line(conn: socket.socket) -> bytes:
    data = b""
    while not data.endswith(b"\n") and len(data) <= MAX_LINE:
        chunk = conn.recv(MAX_LINE)
        if not chunk:
            break
        data += chunk
    return data


def ask(folder: Path, request: dict[str, Any]) -> dict[str, Any] | None:
    """The follower's answer to `request`; None when no follower of ours answers (none runs,
    its socket is stale, or it runs as another user)."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.settimeout(ASK_TIMEOUT_S)
        try:
            with _address(folder / SOCKET_FILE) as address:
                conn.connect(address)
            if not peer_is_owner(conn):
                return None  # the key is ours to hand to, or take from, our own process only
            conn.sendall(json.dumps(request).encode() + b"\n")
            reply = json.loads(_read_line(conn) or b"null")
        except (OSError, ValueError):
            return None
    return reply if isinstance(reply, dict) else None


class KeyAgent:
    """The socket and the thread that serves it, for the follower's lifetime (`start`, `close`)."""

    def __init__(
        self, folder: Path, opens: Check, log: Callable[[str], None], owner: int | None = None
    ) -> None:
        self.path = folder / SOCKET_FILE
        self.opens = opens
        self.log = log
        self.owner = owner  # whose processes it answers (default: our uid)
        self.held = Held()
        self._server: socket.socket | None = None

    def start(self) -> None:
        """Listen (a stale socket left by a dead follower is replaced: we hold the liveness lock)."""
        server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()
        old = os.umask(0o177)  # 0600 from the start: no moment when another user could connect
        try:
            with _address(self.path) as address:
                server.bind(address)
        finally:
            os.umask(old)
        server.listen(8)
        self._server = server
        import threading

        threading.Thread(target=self._serve, name="keyagent", daemon=True).start()

    def close(self) -> None:
        self.held.forget()
        server, self._server = self._server, None
        if server is not None:
            server.close()
            with contextlib.suppress(FileNotFoundError):
                self.path.unlink()

    def _serve(self) -> None:
        while (server := self._server) is not None:
            try:
                conn, _ = server.accept()
            except OSError:
                return  # closed
            with conn:
                self._one(conn)

    def _one(self, conn: socket.socket) -> None:
        conn.settimeout(ASK_TIMEOUT_S)
        try:
            if not peer_is_owner(conn, self.owner):
                self.log("key agent: refused a connection from another user")
                return
            request = json.loads(_read_line(conn) or b"null")
            reply = answer(request, self.held, self.opens)
            if reply.get("ok"):
                self.log(f"key agent: {request['op']}ed")  # when, never what
            conn.sendall(json.dumps(reply).encode() + b"\n")
        except (OSError, ValueError) as exc:
            self.log(f"key agent: a request failed ({exc})")
