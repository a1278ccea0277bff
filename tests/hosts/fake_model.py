"""A fake model API on 127.0.0.1 that real hosts (opencode, Codex, Claude Code) can finish turns against.

It answers every turn with `FAKE_OK [req N]` and records every request. A conversation
resends its history with each request, so a text injected once shows up in every later
request: `first_seen(needle)` is when the model first saw it, `count(needle)` counts the
requests in which it was new (in the trailing user turn). "Delivered exactly once" is
`count(needle) == 1`; `len(find(needle))` only says how many requests carried it.

A request whose trailing user turn contains SLOW_REPLY is streamed with `slow_delay`
seconds between events, so a test can inject while a turn is running. With `tool_command` set,
a Responses request that offers tools and whose trailing user turn contains RUN_TOOL is
answered with a call of Codex's shell tool (`exec_command`) running that command: the turn
then has a tool-call boundary, and the request after it (carrying the tool's output) gets the
text answer. Messages (Claude Code's `Bash`) and Chat Completions (opencode's `bash`) requests
get the same, through `shell_call_events`.
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tests.hosts import wire

Request = dict[str, Any]
Reply = Callable[[Request], str]

SLOW_MARKER = "SLOW_REPLY"
TOOL_MARKER = "RUN_TOOL"
SHELL_TOOL = "exec_command"
GEMINI_SHELL_TOOL = "run_shell_command"


def default_reply(request: Request) -> str:
    return f"FAKE_OK [req {request['n']}]"


class FakeModel:
    """`with FakeModel() as model:` serves at `model.url`; `model.requests` is what it received."""

    def __init__(self, slow_delay: float = 1.5, reply: Reply = default_reply,
                 tool_command: str | None = None, escalate: bool = False) -> None:
        self.slow_delay = slow_delay
        self.escalate = escalate  # Codex's call asks to run outside the sandbox: an approval
        self.reply = reply
        self.tool_command = tool_command
        self._requests: list[Request] = []
        self._changed = threading.Condition()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        assert self._server is not None, "FakeModel is not started"
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def start(self) -> FakeModel:
        self._server = _Server(("127.0.0.1", 0), _handler_for(self))
        self._thread = threading.Thread(target=self._server.serve_forever, name="fake-model", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.drop_connections()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._server, self._thread = None, None

    def __enter__(self) -> FakeModel:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def record(self, method: str, path: str, headers: dict[str, str], body: Any) -> Request:
        texts = _texts(path.split("?")[0], body)
        with self._changed:
            request: Request = {
                "n": len(self._requests) + 1, "ts": time.time(), "method": method, "path": path,
                "headers": headers, "body": body, "texts": texts.texts,
                "system_texts": texts.system_texts, "last_user_text": texts.last_user_text,
                "trailing_text": texts.trailing_text,
            }
            self._requests.append(request)
            self._changed.notify_all()
        return request

    @property
    def requests(self) -> list[Request]:
        """A snapshot, oldest first; `n` counts from 1 and matches the `[req N]` in replies."""
        with self._changed:
            return list(self._requests)

    def find(self, needle: str, *, system: bool = False) -> list[Request]:
        """Requests whose conversation texts (and system texts, if `system`) contain needle."""
        return [r for r in self.requests if _contains(r, needle, system)]

    def first_seen(self, needle: str, *, system: bool = False) -> Request | None:
        found = self.find(needle, system=system)
        return found[0] if found else None

    def count(self, needle: str) -> int:
        """How many requests carried needle as new input (in the user turn after the last reply)."""
        return sum(needle in r["last_user_text"] for r in self.requests)

    def count_new(self, needle: str) -> int:
        """Like `count`, but system messages after the last reply count too: Claude Code hands a
        message that arrives mid-turn to the model as a system message after the tool's result."""
        return sum(needle in r["trailing_text"] for r in self.requests)

    def wait_until(self, predicate: Callable[[Request], bool], timeout: float, what: str) -> Request:
        """The first request (old or new) satisfying predicate; AssertionError after timeout."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while True:
                for request in self._requests:
                    if predicate(request):
                        return request
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"the fake model never saw {what} in {timeout}s; {self.summary()}")
                self._changed.wait(left)

    def wait_for(self, needle: str, timeout: float = 30.0, *, system: bool = False) -> Request:
        return self.wait_until(lambda r: _contains(r, needle, system), timeout, repr(needle))

    def summary(self) -> str:
        lines = [f"{len(self._requests)} request(s):"]
        for r in self._requests:
            last = r["last_user_text"].replace("\n", " ")
            lines.append(f"  #{r['n']} {r['method']} {r['path']} last user: {last[:200]!r}")
        return "\n".join(lines)


def _texts(path: str, body: Any) -> wire.Texts:
    if not isinstance(body, dict):
        return wire.Texts()
    return wire.gemini_extract(body) if wire.gemini_action(path) else wire.extract(path, body)


def _contains(request: Request, needle: str, system: bool) -> bool:
    texts = request["texts"] + (request["system_texts"] if system else [])
    return any(needle in t for t in texts)


SHELL_TOOLS = {"/v1/messages": ("Bash",), "/v1/chat/completions": ("bash",)}


def shell_call_events(path: str, body: dict[str, Any], request: Request,
                      command: str | None) -> list[wire.Event] | None:
    """A call of the host's shell tool running `command`, for a Messages or Chat Completions
    request that offers that tool and whose trailing user turn holds RUN_TOOL; else None.
    The request after the call carries the tool's output, not RUN_TOOL, and gets the text answer."""
    names = SHELL_TOOLS.get(path)
    if command is None or names is None or TOOL_MARKER not in request["last_user_text"]:
        return None
    name = wire.offered_tool(path, body, names)
    if name is None:
        return None
    arguments = json.dumps({"command": command, "description": "Run the requested command"})
    make = wire.messages_tool_events if path == "/v1/messages" else wire.chat_tool_events
    return make(name, arguments, str(body.get("model", "fake-model")), request["n"], 42)


QWEN_SHELL_TOOL = "run_shell_command"


def qwen_shell_call_events(path: str, body: dict[str, Any], request: Request,
                           command: str | None) -> list[wire.Event] | None:
    """Qwen Code's shell tool (`run_shell_command`, on Chat Completions) called with `command`,
    for a request that offers it and whose trailing user turn holds RUN_TOOL; else None."""
    if (command is None or path != "/v1/chat/completions" or TOOL_MARKER not in request["last_user_text"]
            or wire.offered_tool(path, body, (QWEN_SHELL_TOOL,)) is None):
        return None
    arguments = json.dumps({"command": command, "description": "Run the requested command",
                            "is_background": False})
    return wire.chat_tool_events(QWEN_SHELL_TOOL, arguments, str(body.get("model", "fake-model")),
                                 request["n"], 42)


class _Server(ThreadingHTTPServer):
    """Tracks open connections so stop() can end keep-alive and streaming ones too."""

    daemon_threads = True

    def __init__(self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler]) -> None:
        super().__init__(address, handler)
        self.connections: set[socket.socket] = set()
        self.connections_lock = threading.Lock()

    def drop_connections(self) -> None:
        with self.connections_lock:
            for conn in self.connections:
                with contextlib.suppress(OSError):
                    conn.shutdown(socket.SHUT_RDWR)


def _handler_for(model: FakeModel) -> type[BaseHTTPRequestHandler]:
    class Handler(_Handler):
        fake = model

    return Handler


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    timeout = 120
    fake: FakeModel
    server: _Server

    def setup(self) -> None:
        super().setup()
        with self.server.connections_lock:
            self.server.connections.add(self.connection)

    def finish(self) -> None:
        with self.server.connections_lock:
            self.server.connections.discard(self.connection)
        super().finish()

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _body(self) -> Any:
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        try:
            return json.loads(raw) if raw else None
        except ValueError:
            return raw.decode(errors="replace")

    def _json(self, status: int, data: Any) -> None:
        payload = json.dumps(data).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def do_HEAD(self) -> None:
        self.fake.record("HEAD", self.path, dict(self.headers), None)
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_GET(self) -> None:
        path = self.path.split("?")[0]
        self.fake.record("GET", self.path, dict(self.headers), None)
        if path.endswith("/models"):
            self._json(200, wire.models_list())
        elif path == "/api/hello":
            self._json(200, {})
        else:
            self._json(404, {"error": {"type": "not_found", "message": f"fake model: no GET {path}"}})

    def do_POST(self) -> None:
        path, body = self.path.split("?")[0], self._body()
        request = self.fake.record("POST", self.path, dict(self.headers), body)
        if path.endswith("/count_tokens"):
            self._json(200, {"input_tokens": 42})
            return
        if wire.gemini_action(path) and isinstance(body, dict):
            self._gemini(path, body, request)
            return
        kinds = {
            "/v1/responses": (wire.responses_events, wire.responses_body),
            "/v1/chat/completions": (wire.chat_events, wire.chat_body),
            "/v1/messages": (wire.messages_events, wire.messages_body),
        }
        if path not in kinds or not isinstance(body, dict):
            self._json(404, {"error": {"type": "not_found", "message": f"fake model: no POST {path}"}})
            return
        events, whole = kinds[path]
        args = (self.fake.reply(request), str(body.get("model", "fake-model")), request["n"], 42)
        if body.get("stream"):
            slow = SLOW_MARKER in request["last_user_text"]
            command = self.fake.tool_command
            # Only a request that offers tools may get a call (Codex's title request offers none).
            if (path == "/v1/responses" and command is not None and body.get("tools")
                    and TOOL_MARKER in request["last_user_text"]):
                escalated = {"sandbox_permissions": "require_escalated", "justification": "the test asks"}
                arguments = json.dumps({"cmd": command, **(escalated if self.fake.escalate else {})})
                stream = wire.responses_tool_events(SHELL_TOOL, arguments, *args[1:])
            else:
                stream = (shell_call_events(path, body, request, command)
                          or qwen_shell_call_events(path, body, request, command) or events(*args))
            self._stream(stream, self.fake.slow_delay if slow else 0.0)
        else:
            self._json(200, whole(*args))

    def _gemini(self, path: str, body: dict[str, Any], request: Request) -> None:
        """Google's Gemini API (Gemini CLI): text answers, SLOW_REPLY streamed slowly, RUN_TOOL
        answered with a call of `run_shell_command` when the request offers it, and JSON for
        the side questions Gemini CLI asks in JSON mode."""
        action, model = wire.gemini_action(path), wire.gemini_model(path)
        if action == "countTokens":
            self._json(200, {"totalTokens": 42})
            return
        text = wire.gemini_json_answer(body) or self.fake.reply(request)
        command = self.fake.tool_command
        if (command is not None and TOOL_MARKER in request["last_user_text"]
                and wire.gemini_offers(body, GEMINI_SHELL_TOOL)):
            args = {"command": command, "description": "Run the requested command"}
            events = wire.gemini_tool_events(GEMINI_SHELL_TOOL, args, model, request["n"], 42)
        else:
            events = wire.gemini_events(text, model, request["n"], 42)
        if action == "generateContent":
            self._json(200, wire.gemini_body(text, model, request["n"], 42))
            return
        slow = SLOW_MARKER in request["last_user_text"]
        self._stream(events, self.fake.slow_delay if slow else 0.0)

    def _stream(self, events: list[wire.Event], delay: float) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        try:
            for event in events:
                chunk = wire.sse(event)
                self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                self.wfile.flush()
                if delay:
                    time.sleep(delay)
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except OSError:
            self.close_connection = True  # the host aborted the stream (e.g. Codex turn/steer)
