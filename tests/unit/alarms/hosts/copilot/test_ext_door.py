"""alarms.hosts.copilot.ext_door: the door's end of the extension's relay. Calls go out as lines
and wait for the answer with their id; events come back shaped as the server's notifications;
the end of the extension's stream ends every wait."""

from __future__ import annotations

import io
import json
import threading
from typing import Any

import pytest

from alarms.hosts.copilot.ext_door import Bridge, prompt_mode
from alarms.hosts.copilot.rpc import RpcError


class Relay:
    """Stands for the extension: answers each call with `answer(call)`."""

    def __init__(self, answer: Any) -> None:
        self.calls: list[dict[str, Any]] = []
        self.notices: list[dict[str, Any]] = []
        self.bridge = Bridge("sid-1", self.emit, self.notices.append)
        self.answer = answer

    def emit(self, line: str) -> None:
        call = json.loads(line)
        self.calls.append(call)
        if self.answer is not None:
            threading.Thread(target=self.bridge.feed, args=({"id": call["id"], **self.answer(call)},)).start()


def test_a_call_goes_out_as_a_line_and_returns_its_answer() -> None:
    relay = Relay(lambda call: {"result": {"messageId": "m-1"}})
    assert relay.bridge.call("session.send", {"prompt": "hi", "mode": "enqueue"}) == {"messageId": "m-1"}
    assert relay.calls == [{"id": 1, "method": "session.send", "params": {"prompt": "hi", "mode": "enqueue"}}]


def test_a_refusal_is_an_rpc_error() -> None:
    relay = Relay(lambda call: {"error": "session is busy"})
    with pytest.raises(RpcError, match="session is busy"):
        relay.bridge.call("session.send", {"prompt": "hi"})


def test_an_unanswered_call_fails_at_its_timeout_and_at_the_end_of_the_stream() -> None:
    relay = Relay(None)
    with pytest.raises(RpcError, match="did not answer"):
        relay.bridge.call("session.permissions.pendingRequests", {}, timeout=0.05)
    threading.Timer(0.05, relay.bridge.end).start()
    with pytest.raises(RpcError, match="ended"):
        relay.bridge.call("session.permissions.pendingRequests", {}, timeout=5)
    assert relay.bridge.closed


def test_events_arrive_as_the_servers_notifications_and_the_stream_end_closes() -> None:
    relay = Relay(None)
    event = {"type": "session.idle", "data": {}}
    lines = b'{"event": %s}\nnot json\n[1]\n' % json.dumps(event).encode()
    relay.bridge.read(io.BytesIO(lines))
    assert relay.notices[0] == {"method": "session.event", "params": {"sessionId": "sid-1", "event": event}}
    assert relay.notices[1]["method"] == "connection.closed" and len(relay.notices) == 2
    assert relay.bridge.closed


def test_prompt_mode_is_copilot_started_with_a_prompt() -> None:
    assert prompt_mode(["copilot", "-p", "hello", "--allow-all-tools"])
    assert prompt_mode(["copilot", "--prompt=hello"]) and prompt_mode(["copilot", "--prompt", "hi"])
    assert not prompt_mode(["copilot", "--yolo"]) and not prompt_mode(["copilot"]) and not prompt_mode([])
