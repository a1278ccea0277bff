"""A small client for the JSON-RPC server of `copilot --ui-server --port N` (Copilot CLI 1.0.102).

The wire is the Language Server framing: each message is `Content-Length: N\\r\\n\\r\\n` and N bytes
of JSON (the Copilot SDK uses vscode-jsonrpc over the TCP socket). Requests carry an `id` and get
a response with the same `id`; everything else the server writes is a notification
(`session.event`, `session.lifecycle`, ...), handed to `on_notice` in arrival order. The server
may ask the client something (a request with a `method` and an `id`): this client answers each
with an error, so the server never waits on us.

`Decoder` and `encode` are the pure framing, with limits (a header line, a body) so a peer that
sends nonsense costs a bounded read; `Connection` is the socket and its reader thread.

Standard library only.
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
from collections.abc import Callable
from typing import Any

from alarms.rpc_calls import Calls, NoAnswer

__all__ = ["Connection", "Decoder", "FramingError", "RpcError", "encode"]

MAX_HEADER = 8 * 1024
MAX_BODY = 64 * 1024 * 1024  # a session event carrying a whole transcript snapshot is large
CALL_TIMEOUT_S = 30.0
NO_CLIENT_METHODS = -32601

Message = dict[str, Any]


class RpcError(Exception):
    """The server answered with an error, went away, or did not answer in time."""


class FramingError(RpcError):
    """The bytes on the wire are not Content-Length framed JSON within the limits."""


def encode(message: Message) -> bytes:
    body = json.dumps(message, ensure_ascii=False).encode()
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


class Decoder:
    """Bytes in (`feed`), whole messages out."""

    def __init__(self, max_header: int = MAX_HEADER, max_body: int = MAX_BODY) -> None:
        self._buf = b""
        self._max_header, self._max_body = max_header, max_body

    def feed(self, data: bytes) -> list[Message]:
        self._buf += data
        out: list[Message] = []
        while True:
            end = self._buf.find(b"\r\n\r\n")
            if end < 0:
                if len(self._buf) > self._max_header:
                    raise FramingError(f"a message header longer than {self._max_header} bytes")
                return out
            length = self._length(self._buf[:end])
            start = end + 4
            if len(self._buf) - start < length:
                return out
            body, self._buf = self._buf[start:start + length], self._buf[start + length:]
            try:
                message = json.loads(body)
            except ValueError as exc:
                raise FramingError(f"a message that is not JSON: {exc}") from exc
            if not isinstance(message, dict):
                raise FramingError("a message that is not a JSON object")
            out.append(message)

    def _length(self, header: bytes) -> int:
        if len(header) > self._max_header:
            raise FramingError(f"a message header longer than {self._max_header} bytes")
        for line in header.split(b"\r\n"):
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                try:
                    length = int(value.strip())
                except ValueError as exc:
                    raise FramingError(f"a Content-Length that is not a number: {value!r}") from exc
                if not 0 <= length <= self._max_body:
                    raise FramingError(f"a message of {length} bytes (limit {self._max_body})")
                return length
        raise FramingError("a message header without Content-Length")


class Connection:
    """One TCP connection to the server; `close` (or `with`) ends it. `on_notice` runs on the
    reader thread, so it must be quick and must not call back into this connection."""

    def __init__(self, sock: socket.socket, on_notice: Callable[[Message], None] | None = None) -> None:
        self.sock = sock
        self._on_notice = on_notice or (lambda _m: None)
        self._calls = Calls()
        self._closed: str | None = None
        self._write_lock = threading.Lock()
        self._reader = threading.Thread(target=self._read_loop, name="copilot-rpc", daemon=True)
        self._reader.start()

    @classmethod
    def open(cls, port: int, on_notice: Callable[[Message], None] | None = None,
             host: str = "127.0.0.1", timeout: float = CALL_TIMEOUT_S) -> Connection:
        """RpcError (an OSError inside) if nothing listens there."""
        try:
            sock = socket.create_connection((host, port), timeout=timeout)
        except OSError as exc:
            raise RpcError(f"cannot reach Copilot CLI at {host}:{port}: {exc}") from exc
        sock.settimeout(None)
        return cls(sock, on_notice)

    def __enter__(self) -> Connection:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    @property
    def closed(self) -> bool:
        return self._closed is not None

    def call(self, method: str, params: dict[str, Any], timeout: float = CALL_TIMEOUT_S) -> Any:
        """The result of `method`; RpcError if the server answers with an error, closes, or is late."""
        rid = self._calls.new_id()
        self._send({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
        try:
            response = self._calls.wait(rid, timeout)
        except NoAnswer as exc:
            if exc.late:
                raise RpcError(f"Copilot CLI did not answer {method} within {timeout:g} s") from None
            raise RpcError(f"Copilot CLI closed the connection ({self._closed}) before {method}") from None
        if "error" in response:
            error = response["error"] if isinstance(response["error"], dict) else {}
            raise RpcError(f"Copilot CLI refused {method}: {error.get('message', response['error'])}")
        return response.get("result")

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)
        self.sock.close()
        self._reader.join(timeout=5)

    def _send(self, message: Message) -> None:
        data = encode(message)
        with self._write_lock:
            try:
                self.sock.sendall(data)
            except OSError as exc:
                raise RpcError(f"cannot write to Copilot CLI: {exc}") from exc

    def _read_loop(self) -> None:
        decoder = Decoder()
        reason = "end of stream"
        try:
            while True:
                data = self.sock.recv(65536)
                if not data:
                    break
                for message in decoder.feed(data):
                    self._dispatch(message)
        except (OSError, FramingError) as exc:
            reason = str(exc) or type(exc).__name__
        self._closed = reason
        self._calls.gone()
        self._on_notice({"method": "connection.closed", "params": {"reason": reason}})

    def _dispatch(self, message: Message) -> None:
        if "method" in message and "id" in message:  # the server asks: we serve nothing
            with contextlib.suppress(RpcError):
                self._send({"jsonrpc": "2.0", "id": message["id"],
                            "error": {"code": NO_CLIENT_METHODS, "message": "talk serves no requests"}})
        elif "method" in message:
            self._on_notice(message)
        elif isinstance(message.get("id"), int):
            self._calls.answered(message)
