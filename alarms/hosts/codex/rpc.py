"""A small client for `codex app-server`: JSON-RPC over its stdin/stdout, one object per line.

Codex's own UIs talk to the app-server this way; talk uses it to record hook trust (what the
TUI's /hooks review does) and to start a turn in an idle thread. Requests carry an `id` and get
a response with the same `id`; everything else the server writes is a notification, kept in
arrival order so a caller can wait for, say, `turn/completed`. The server may also ask the
client something (a request with a `method` and an `id`): this client answers every such
question with an error, so the server never waits on us, and a text-only turn asks nothing.

Standard library only: the doors import it.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from alarms.rpc_calls import Calls, NoAnswer

START_TIMEOUT_S = 30.0
CLOSE_TIMEOUT_S = 5.0
NO_CLIENT_METHODS = -32601


class RpcError(Exception):
    """The app-server answered with an error, went away, or did not answer in time."""


Notification = dict[str, Any]


class AppServer:
    """One `codex app-server` child process; close it (or use `with`) to stop it by its pid."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        self.proc = proc
        self._calls = Calls()
        self.notifications: list[Notification] = []
        self._changed = self._calls.changed  # answers and notifications alike
        self._write_lock = threading.Lock()
        self._reader = threading.Thread(target=self._read_loop, name="codex-app-server", daemon=True)
        self._reader.start()

    @classmethod
    def start(
        cls, codex_bin: str | Path, env: dict[str, str] | None = None, cwd: str | Path | None = None,
        client: str = "talk", timeout: float = START_TIMEOUT_S,
    ) -> AppServer:
        """Start the server and complete the handshake (`initialize`, then `initialized`)."""
        proc = subprocess.Popen(
            [str(codex_bin), "app-server"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL, env=env, cwd=cwd, start_new_session=True,
        )
        server = cls(proc)
        try:
            server.request("initialize", {"clientInfo": {"name": client, "version": "0"}}, timeout)
            server.notify("initialized")
        except BaseException:
            server.close()
            raise
        return server

    @property
    def pid(self) -> int:
        return self.proc.pid

    def __enter__(self) -> AppServer:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def _send(self, message: dict[str, Any]) -> None:
        stdin = self.proc.stdin
        assert stdin is not None
        with self._write_lock:
            try:
                stdin.write(json.dumps(message).encode() + b"\n")
                stdin.flush()
            except (BrokenPipeError, ValueError) as exc:
                raise RpcError(f"codex app-server (pid {self.pid}) is gone: {exc}") from exc

    def notify(self, method: str, params: dict[str, Any] | None = None) -> None:
        self._send({"method": method} if params is None else {"method": method, "params": params})

    def request(self, method: str, params: dict[str, Any], timeout: float = START_TIMEOUT_S) -> Any:
        """Send a request and wait for its result; an error answer raises RpcError."""
        msg_id = self._calls.new_id()
        self._send({"id": msg_id, "method": method, "params": params})
        try:
            response = self._calls.wait(msg_id, timeout)
        except NoAnswer as exc:
            why = "did not answer in time" if exc.late else "exited"
            raise RpcError(f"codex app-server {why} (pid {self.pid}, request {method})") from None
        if "error" in response:
            raise RpcError(f"codex app-server refused {method}: {response['error']}")
        return response.get("result")

    def wait_for(
        self, method: str, match: Callable[[Notification], bool] = lambda _: True,
        timeout: float = START_TIMEOUT_S, after: int = 0,
    ) -> Notification:
        """The first notification `method` (from index `after` on) that `match` accepts."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while True:
                for note in self.notifications[after:]:
                    if note.get("method") == method and match(note):
                        return note
                left = deadline - time.monotonic()
                if left <= 0 or self._calls.is_gone:
                    raise RpcError(f"no {method} notification from codex app-server (pid {self.pid})")
                self._changed.wait(min(left, 0.5))

    def _read_loop(self) -> None:
        stdout: IO[bytes] | None = self.proc.stdout
        assert stdout is not None
        try:
            for line in stdout:
                try:
                    message = json.loads(line)
                except ValueError:
                    continue  # not ours to judge; the server logs to stderr
                if isinstance(message, dict):
                    self._dispatch(message)
        finally:
            self._calls.gone()

    def _dispatch(self, message: dict[str, Any]) -> None:
        if "method" in message and "id" in message:  # the server asks us: we answer nothing
            error = {"code": NO_CLIENT_METHODS, "message": "talk's client handles no requests"}
            with contextlib.suppress(RpcError):
                self._send({"id": message["id"], "error": error})
            return
        if "method" in message:
            with self._changed:
                self.notifications.append(message)
                self._changed.notify_all()
        elif isinstance(message.get("id"), int):
            self._calls.answered(message)

    def close(self) -> None:
        """End the server: EOF on its stdin, then SIGTERM, then SIGKILL, sent to its process group.

        The group is the one `start` created for this server (its pid), so the native codex
        binary that the npm wrapper runs goes with it, and nothing else does.
        """
        if self.proc.stdin is not None:
            with contextlib.suppress(OSError):
                self.proc.stdin.close()
        for sig in (None, signal.SIGTERM, signal.SIGKILL):
            if sig is not None:
                _killpg(self.proc.pid, sig)
            try:
                self.proc.wait(timeout=CLOSE_TIMEOUT_S)
                break
            except subprocess.TimeoutExpired:
                continue
        _killpg(self.proc.pid, signal.SIGKILL)  # anything of the group the wrapper left behind
        self._reader.join(timeout=CLOSE_TIMEOUT_S)
        if self.proc.stdout is not None:
            self.proc.stdout.close()


def _killpg(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)
