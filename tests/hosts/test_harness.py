"""The host harness itself, without any host: the fake model's three wire formats and cleanup."""

from __future__ import annotations

import http.client
import json
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.hosts.fake_model import FakeModel
from tests.hosts.npm import host_env
from tests.hosts.procs import ProcessGroup, alive, reap_home


def post(model: FakeModel, path: str, body: dict[str, Any]) -> tuple[int, str]:
    conn = http.client.HTTPConnection(model.url.removeprefix("http://"), timeout=10)
    try:
        conn.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
        resp = conn.getresponse()
        return resp.status, resp.read().decode()
    finally:
        conn.close()


def datas(stream: str) -> list[Any]:
    lines = [line[len("data: "):] for line in stream.splitlines() if line.startswith("data: ")]
    return [line if line == "[DONE]" else json.loads(line) for line in lines]


def test_responses_stream_ends_completed_with_the_reply(fake_model: FakeModel) -> None:
    body = {"model": "m", "stream": True, "instructions": "SYS", "input": [
        {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "DEV"}]},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi R1"}]},
    ]}
    status, stream = post(fake_model, "/v1/responses", body)
    events = datas(stream)
    assert status == 200
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    assert events[-1]["type"] == "response.completed"
    assert events[-1]["response"]["output"][0]["content"][0]["text"] == "FAKE_OK [req 1]"
    seen = fake_model.wait_for("R1", timeout=1)
    assert seen["system_texts"] == ["SYS", "DEV"]
    assert seen["last_user_text"] == "hi R1"


def test_chat_stream_sends_usage_then_done(fake_model: FakeModel) -> None:
    body = {"model": "m", "stream": True, "messages": [
        {"role": "system", "content": "SYS"}, {"role": "user", "content": "hi C1"},
    ]}
    events = datas(post(fake_model, "/v1/chat/completions", body)[1])
    assert events[-1] == "[DONE]"
    assert events[-2]["choices"] == [] and events[-2]["usage"]["total_tokens"] > 0
    assert "".join(e["choices"][0]["delta"].get("content", "") for e in events[:-2]) == "FAKE_OK [req 1]"


def test_messages_stream_and_history_counting(fake_model: FakeModel) -> None:
    first: dict[str, Any] = {"stream": True, "system": [{"type": "text", "text": "SYS"}],
             "messages": [{"role": "user", "content": [{"type": "text", "text": "NEWS-1"}]}]}
    post(fake_model, "/v1/messages?beta=true", first)
    later = {**first, "messages": [*first["messages"], {"role": "assistant", "content": "ok"},
                                   {"role": "user", "content": "next"}]}
    events = datas(post(fake_model, "/v1/messages?beta=true", later)[1])
    assert events[-1]["type"] == "message_stop"
    assert events[-2]["delta"]["stop_reason"] == "end_turn"
    assert len(fake_model.find("NEWS-1")) == 2  # the history repeats it
    assert fake_model.count("NEWS-1") == 1  # but it was new input once
    first_seen = fake_model.first_seen("NEWS-1")
    assert first_seen is not None and first_seen["n"] == 1
    assert fake_model.find("SYS") == [] and len(fake_model.find("SYS", system=True)) == 2


def test_slow_reply_is_paced_and_wait_for_reports_what_came() -> None:
    with FakeModel(slow_delay=0.05) as model:
        started = time.monotonic()
        post(model, "/v1/chat/completions", {"stream": True, "messages": [
            {"role": "user", "content": "SLOW_REPLY please"}]})
        assert time.monotonic() - started >= 0.05 * 5
        with pytest.raises(AssertionError, match="SLOW_REPLY please"):
            model.wait_for("never sent", timeout=0.1)


def test_side_endpoints(fake_model: FakeModel) -> None:
    conn = http.client.HTTPConnection(fake_model.url.removeprefix("http://"), timeout=10)
    conn.request("HEAD", "/api/hello")
    hello = conn.getresponse()
    assert hello.status == 200 and hello.read() == b""
    conn.request("GET", "/v1/models")
    assert json.loads(conn.getresponse().read())["data"][0]["id"] == "fake-model"
    conn.close()
    assert json.loads(post(fake_model, "/v1/messages/count_tokens", {"messages": []})[1])["input_tokens"] > 0


def test_stop_ends_open_keep_alive_and_slow_streams() -> None:
    model = FakeModel(slow_delay=5).start()
    idle = http.client.HTTPConnection(model.url.removeprefix("http://"), timeout=10)
    idle.request("GET", "/v1/models")
    idle.getresponse().read()
    slow = http.client.HTTPConnection(model.url.removeprefix("http://"), timeout=10)
    slow.request("POST", "/v1/messages", json.dumps({"stream": True, "messages": [
        {"role": "user", "content": "SLOW_REPLY"}]}))
    model.wait_for("SLOW_REPLY", timeout=5)
    started = time.monotonic()
    model.stop()
    assert time.monotonic() - started < 2
    idle.close()
    slow.close()


def test_host_env_scrubs_host_settings(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in ("CLAUDECODE", "CLAUDE_CODE_ENTRYPOINT", "ANTHROPIC_API_KEY", "OPENAI_API_KEY",
                 "CODEX_HOME", "OPENCODE_CONFIG", "TALK_HOME", "XDG_CONFIG_HOME"):
        monkeypatch.setenv(name, "leak")
    monkeypatch.setenv("NO_PROXY", "example.org")
    env = host_env(tmp_path, FAKE_API_KEY="k")
    assert "leak" not in env.values()
    assert env["HOME"] == str(tmp_path) and env["FAKE_API_KEY"] == "k"
    assert env["NO_PROXY"] == env["no_proxy"] == "example.org,127.0.0.1,localhost"
    assert env["DISABLE_AUTOUPDATER"] == "1"


def test_stop_and_reap_kill_orphans_by_pid(tmp_path: Path) -> None:
    home = tmp_path / "home"
    orphan_pid = tmp_path / "orphan.pid"
    spawn = (
        "import subprocess, sys\n"
        "sleeper = [sys.executable, '-c', 'import time; time.sleep(60)']\n"
        "p = subprocess.Popen(sleeper, start_new_session=True)\n"
        f"open({str(orphan_pid)!r}, 'w').write(str(p.pid))\n"
        "import time; time.sleep(60)\n"
    )
    with ProcessGroup() as group:
        parent = group.start([sys.executable, "-c", spawn], cwd=tmp_path, env=host_env(home))
        deadline = time.monotonic() + 10
        while not orphan_pid.exists() or not orphan_pid.read_text():
            assert time.monotonic() < deadline
            time.sleep(0.02)
        parent.kill()  # the child escapes its parent and its group, as a daemonised host helper would
        parent.wait()
    pid = int(orphan_pid.read_text())
    assert alive(pid)
    assert reap_home(home, grace=1) == [pid]
    assert not alive(pid)


# --- the shell tool call for Claude Code (Messages) and opencode (Chat Completions) ------------------

def test_messages_run_tool_gets_a_bash_call_then_text_after_its_result() -> None:
    tools = [{"name": "Read", "input_schema": {}}, {"name": "Bash", "input_schema": {}}]
    ask = {"role": "user", "content": [{"type": "text", "text": "go RUN_TOOL"}]}
    with FakeModel(tool_command="sleep 1") as model:
        events = datas(post(model, "/v1/messages?beta=true", {"stream": True, "tools": tools,
                                                              "messages": [ask]})[1])
        block = events[1]["content_block"]
        assert (block["type"], block["name"]) == ("tool_use", "Bash")
        assert json.loads(events[2]["delta"]["partial_json"])["command"] == "sleep 1"
        assert events[-2]["delta"]["stop_reason"] == "tool_use"
        call = {"role": "assistant", "content": [{**block, "input": {"command": "sleep 1"}}]}
        result = {"role": "user", "content": [{"type": "tool_result", "tool_use_id": block["id"],
                                               "content": "TOOL-OUT"}]}
        after = datas(post(model, "/v1/messages", {"stream": True, "tools": tools,
                                                   "messages": [ask, call, result]})[1])
        assert after[-2]["delta"]["stop_reason"] == "end_turn"
        assert model.first_seen("TOOL-OUT") == model.requests[1]
        no_tool = datas(post(model, "/v1/messages", {"stream": True, "messages": [ask]})[1])
        assert no_tool[1]["content_block"]["type"] == "text"  # Bash not offered: a text answer


def test_chat_run_tool_gets_a_bash_call_then_text_after_its_result() -> None:
    tools = [{"type": "function", "function": {"name": "bash", "parameters": {}}}]
    ask = {"role": "user", "content": "go RUN_TOOL"}
    with FakeModel(tool_command="sleep 1") as model:
        events = datas(post(model, "/v1/chat/completions", {"stream": True, "tools": tools,
                                                            "messages": [ask]})[1])
        (call,) = events[0]["choices"][0]["delta"]["tool_calls"]
        assert call["function"]["name"] == "bash"
        assert json.loads(events[1]["choices"][0]["delta"]["tool_calls"][0]["function"]["arguments"]) == {
            "command": "sleep 1", "description": "Run the requested command"}
        assert events[2]["choices"][0]["finish_reason"] == "tool_calls" and events[-1] == "[DONE]"
        history = [ask, {"role": "assistant", "content": None, "tool_calls": [call]},
                   {"role": "tool", "tool_call_id": call["id"], "content": "TOOL-OUT"}]
        after = datas(post(model, "/v1/chat/completions", {"stream": True, "tools": tools,
                                                           "messages": history})[1])
        assert "".join(e["choices"][0]["delta"].get("content", "") for e in after[:-2]) == "FAKE_OK [req 2]"
    with FakeModel() as model:  # no command set: RUN_TOOL is just text
        plain = datas(post(model, "/v1/chat/completions", {"stream": True, "tools": tools,
                                                           "messages": [ask]})[1])
        assert "tool_calls" not in plain[0]["choices"][0]["delta"]
