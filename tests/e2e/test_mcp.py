"""`talk mcp` end to end: the real server process, driven by the MCP SDK's own stdio client.

Bob's agent talks to bob's `talk mcp` over stdin/stdout; alice is a plain `talk` CLI on her own
TALK_HOME; mail goes through a real relay, and bob's follower spools it for the MCP session.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import Coroutine
from pathlib import Path
from typing import Any

from mcp import Client, StdioServerParameters
from mcp.types import CallToolResult, TextContent

from durable.version import version
from spool_writer.record import SpoolRecord
from spool_writer.spool import Spool
from tests.conftest import TALK, Agent, RelayProcess, make_agent

SID = "s-mcp"
TOOLS = {"send_message", "list_peers", "check_inbox", "message_status"}
CALL_TIMEOUT_S = 30.0
TEST_TIMEOUT_S = 120.0


def server(agent: Agent) -> Client:
    params = StdioServerParameters(command=TALK, args=["mcp", "--session", SID], env=agent.env())
    return Client(params, read_timeout_seconds=CALL_TIMEOUT_S)


def text_of(result: CallToolResult) -> str:
    return "\n".join(block.text for block in result.content if isinstance(block, TextContent))


async def call(client: Client, name: str, **args: Any) -> CallToolResult:
    return await client.call_tool(name, args)


async def ok(client: Client, name: str, **args: Any) -> Any:
    result = await call(client, name, **args)
    assert not result.is_error, f"{name} failed: {text_of(result)}"
    return result.structured_content


async def failed(client: Client, name: str, **args: Any) -> str:
    result = await call(client, name, **args)
    assert result.is_error, f"{name} should have failed: {result}"
    return text_of(result)


def run(coro: Coroutine[Any, Any, None]) -> None:
    asyncio.run(asyncio.wait_for(coro, TEST_TIMEOUT_S))


def chat_texts(agent: Agent) -> list[str]:
    return [m["text"] for m in agent.ok("receive").lines() if m["kind"] == "chat"]


async def inbox_until(client: Client, count: int, within: float) -> tuple[list[dict[str, Any]], list[str]]:
    """Poll check_inbox until `count` messages came; returns them and the framed texts seen."""
    messages: list[dict[str, Any]] = []
    framed: list[str] = []
    deadline = time.monotonic() + within
    while len(messages) < count and time.monotonic() < deadline:
        result = await call(client, "check_inbox")
        assert not result.is_error, text_of(result)
        got = result.structured_content["messages"]
        if got:
            messages += got
            framed.append(result.structured_content["framed"])
            assert text_of(result) == framed[-1]  # what the agent reads is the framed form
        else:
            await asyncio.sleep(0.2)
    return messages, framed


def test_the_tools_over_stdio(pair: tuple[Agent, Agent]) -> None:
    alice, bob = pair

    async def scenario() -> None:
        async with server(bob) as client:
            info = client.server_info
            assert info is not None and (info.name, info.version) == ("talk", version())
            tools = (await client.list_tools()).tools
            assert {t.name for t in tools} == TOOLS and len(tools) == len(TOOLS)
            assert all(t.input_schema.get("type") == "object" for t in tools)
            schema = next(t.input_schema for t in tools if t.name == "send_message")
            assert set(schema["required"]) == {"to"}  # text may be left out when files go
            assert schema["properties"]["files"]["anyOf"][0]["type"] == "array"

            peers = (await ok(client, "list_peers"))["peers"]
            assert [(p["name"], p["source"], p["verified"]) for p in peers] == [("alice", "joined", False)]
            assert peers[0]["policy"]["policy"] == "accept" and len(peers[0]["fingerprint"]) == 32

            sent = await ok(client, "send_message", to="alice", text="hi from bob's agent")
            assert sent["to"] == "alice" and sent["state"] == "stored" and len(sent["id"]) == 32
            assert await asyncio.to_thread(chat_texts, alice) == ["hi from bob's agent"]
            assert await asyncio.to_thread(chat_texts, alice) == []  # once
            notes = bob.home.parent / "notes.txt"
            notes.write_text("what the agent found\n" * 1000)
            with_file = await ok(client, "send_message", to="alice", files=[str(notes)])
            assert (with_file["to"], with_file["state"]) == ("alice", "stored")
            assert with_file["id"] != sent["id"]

            await asyncio.to_thread(bob.ok, "follow", "--peer", "alice")
            for text in ("first from alice", "second from alice"):
                await asyncio.to_thread(alice.ok, "send", "bob", text)
            messages, framed = await inbox_until(client, 2, 30)
            assert [(m["name"], m["text"]) for m in messages] == [
                ("alice", "first from alice"), ("alice", "second from alice")]
            assert all({"id", "from", "ts", "kind"} <= set(m) for m in messages)
            assert "first from alice" in "".join(framed) and "second from alice" in "".join(framed)
            assert 'use the send_message tool with to="alice"' in framed[-1] and "talk send" not in framed[-1]
            assert (await ok(client, "check_inbox"))["messages"] == []  # exactly once

            status = await ok(client, "message_status", message_id=sent["id"])
            assert status["id"] == sent["id"] and status["state"] in ("stored", "spooled", "delivered")
            assert status["to"] == sent["to"] == "alice" and status["fingerprint"] == peers[0]["fingerprint"]
            unknown = await failed(client, "message_status", message_id="0" * 32)
            assert "no sent message" in unknown
            assert (await ok(client, "list_peers"))["peers"][0]["name"] == "alice"  # still serving

    try:
        run(scenario())
    finally:
        bob.run("stop")


def test_talk_errors_are_one_line_tool_errors(tmp_path: Path, relay: RelayProcess) -> None:
    carol = make_agent(tmp_path, relay, "carol", None)

    async def scenario() -> None:
        async with server(carol) as client:
            error = await failed(client, "send_message", to="dave", text="hello?")
            assert "no contact 'dave'" in error
            assert "Traceback" not in error and "\n" not in error
            bad = await failed(client, "send_message", to="dave", text="x", wait="read")
            assert "wait" in bad  # the input schema refuses what talk could not do
            assert (await ok(client, "list_peers")) == {"peers": []}
            assert (await ok(client, "check_inbox")) == {"messages": []}

    run(scenario())


def test_the_session_is_registered_when_a_tool_first_asks_for_mail(
    tmp_path: Path, relay: RelayProcess,
) -> None:
    carol = make_agent(tmp_path, relay, "carol", None)

    def sessions() -> list[tuple[str, str, bool]]:
        listed = json.loads(carol.ok("session", "list", "--json").out)
        return [(s["sid"], s["host"], s["alive"]) for s in listed]

    async def scenario() -> None:
        async with server(carol) as client:
            await ok(client, "list_peers")
            assert await asyncio.to_thread(sessions) == []
            await ok(client, "check_inbox")
            assert await asyncio.to_thread(sessions) == [(SID, "other", True)]

    run(scenario())


def waiting_in_inbox(agent: Agent, name: str) -> list[str]:
    inbox = agent.home / name / "spool" / "inbox.ndjson"
    return [json.loads(line)["id"] for line in inbox.read_text().splitlines()] if inbox.exists() else []


def test_a_server_started_only_to_list_its_tools_takes_no_mail(tmp_path: Path, relay: RelayProcess) -> None:
    """The bug: a host's health check (`claude mcp list`) starts the server, lists its tools and
    stops it; the server had registered a session at start, taken the inbox's mail into it, and
    left it in a session that had ended."""
    carol = make_agent(tmp_path, relay, "carol", None)
    Spool(carol.home / "carol" / "spool").deliver(record("m-waiting"))

    async def scenario() -> None:
        async with server(carol) as client:
            assert {t.name for t in (await client.list_tools()).tools} == TOOLS

    run(scenario())
    assert waiting_in_inbox(carol, "carol") == ["m-waiting"]
    assert json.loads(carol.ok("session", "list", "--json").out) == []


def test_the_server_joins_the_session_its_host_process_already_has(
    tmp_path: Path, relay: RelayProcess,
) -> None:
    """The bug: a plugin's monitor and the MCP server in one Claude Code process made two live
    sessions, each with a copy of every message. The server's host is its parent, this process."""
    carol = make_agent(tmp_path, relay, "carol", None)
    carol.ok("session", "register", "--host", "claude", "--id", "claude-own", "--pid", str(os.getpid()))
    Spool(carol.home / "carol" / "spool").deliver(record("m-once"))
    params = StdioServerParameters(command=TALK, args=["mcp", "--host", "claude"], env=carol.env())

    async def scenario() -> None:
        async with Client(params, read_timeout_seconds=CALL_TIMEOUT_S) as client:
            got = await ok(client, "check_inbox")
            assert [m["id"] for m in got["messages"]] == ["m-once"]
            assert (await ok(client, "check_inbox")) == {"messages": []}

    run(scenario())
    listed = json.loads(carol.ok("session", "list", "--json").out)
    assert [(s["sid"], s["unread"]) for s in listed] == [("claude-own", 0)]


def record(msg_id: str) -> SpoolRecord:
    return {"id": msg_id, "from": "a" * 32, "name": "alice", "text": f"text of {msg_id}",
            "ts": "2026-01-01T00:00:00Z", "kind": "chat"}
