"""A second client of a `codex app-server --listen unix://PATH`: JSON-RPC over a WebSocket on that
Unix socket, the way the TUI started with `codex --remote unix://PATH` talks to it.

The server sends every client the notifications about threads as a whole (`thread/started`,
`thread/status/changed`), and the events of a thread's turns only to the clients that started or
resumed it. This client starts or resumes no thread, so questions the server asks about a turn
(an approval) go to the TUI, never here: a question that does reach this client is left
unanswered for the TUI, because an error answer could refuse the user's approval.

`request` waits for the answer to one call; `next_note` hands over the notifications in arrival
order. Codex 0.171.0 (verified): `turn/start` on an idle thread starts a turn the TUI shows, and on
a busy one adds the input to the running turn (a steer), answering with that turn.
"""

from __future__ import annotations

import contextlib
import json
import queue
import threading
from typing import Any

from alarms.hosts.codex.rpc import RpcError
from alarms.rpc_calls import Calls, NoAnswer

__all__ = ["RemoteClient", "RpcError"]

CONNECT_TIMEOUT_S = 10.0
REQUEST_TIMEOUT_S = 30.0
MAX_MESSAGE = 64 * 1024 * 1024  # a thread's history can be large; the server is our own child

Notification = dict[str, Any]


class RemoteClient:
    """One connection; `close` (or `with`) ends it. A reader thread sorts what arrives."""

    def __init__(self, socket_path: str, client: str = "talk", timeout: float = CONNECT_TIMEOUT_S) -> None:
        from websockets.sync.client import unix_connect

        try:
            self._ws = unix_connect(socket_path, uri="ws://localhost/", open_timeout=timeout,
                                    max_size=MAX_MESSAGE)
        except (OSError, TimeoutError, ValueError) as exc:
            raise RpcError(f"cannot connect to codex app-server at {socket_path}: {exc}") from exc
        self._calls = Calls()
        self._notes: queue.Queue[Notification | None] = queue.Queue()
        self._reader = threading.Thread(target=self._read_loop, name="codex-remote", daemon=True)
        self._reader.start()
        self.request("initialize", {"clientInfo": {"name": client, "version": "0"}}, timeout)
        self._send({"method": "initialized"})

    def __enter__(self) -> RemoteClient:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    @property
    def open(self) -> bool:
        return self._reader.is_alive()

    def _send(self, message: dict[str, Any]) -> None:
        try:
            self._ws.send(json.dumps(message))
        except Exception as exc:  # websockets' ConnectionClosed and OSError alike: the server is gone
            raise RpcError(f"codex app-server is gone: {exc}") from exc

    def request(self, method: str, params: dict[str, Any], timeout: float = REQUEST_TIMEOUT_S) -> Any:
        """Send a call and wait for its result. Raises RpcError on an error answer, a closed
        connection or no answer within `timeout`."""
        msg_id = self._calls.new_id()
        self._send({"id": msg_id, "method": method, "params": params})
        try:
            answer = self._calls.wait(msg_id, timeout)
        except NoAnswer as exc:
            why = "did not answer in time" if exc.late else "closed the connection"
            raise RpcError(f"codex app-server {why} ({method})") from None
        if "error" in answer:
            raise RpcError(f"codex app-server refused {method}: {answer['error']}")
        return answer.get("result")

    def next_note(self, timeout: float) -> Notification | None:
        """The next notification, or None after `timeout` (or once the connection has closed)."""
        if not self.open and self._notes.empty():
            return None
        try:
            return self._notes.get(timeout=timeout)
        except queue.Empty:
            return None

    def _read_loop(self) -> None:
        try:
            for raw in self._ws:
                try:
                    message = json.loads(raw)
                except ValueError:
                    continue
                if isinstance(message, dict):
                    self._dispatch(message)
        except Exception:  # a closed or broken connection ends the reader; `open` then says so
            pass
        finally:
            self._notes.put(None)
            self._calls.gone()

    def _dispatch(self, message: dict[str, Any]) -> None:
        if "method" in message and "id" in message:
            return  # a question for the TUI (see the module docstring)
        if "method" in message:
            self._notes.put(message)
            return
        if isinstance(message.get("id"), int):
            self._calls.answered(message)

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self._ws.close()
        self._reader.join(timeout=5.0)
