"""The Gemini CLI hook: its answers per event, what fits after a tool, and runs as a real process
against a real spool folder (the script as Gemini CLI starts it: `PYTHON -I -S gemini_hook.py`)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

from alarms.framing import frame
from alarms.hosts.gemini import hook as gemini_hook
from alarms.hosts.gemini.hook import TOOL_LIMIT, fitter, is_gemini, output_for, tool_output_size
from alarms.hosts.gemini.install import hook_script
from durable.receipt_states import Receipt
from spool_writer.record import SpoolRecord
from spool_writer.spool import Spool

PYTHON = sys.executable
HOOK = str(hook_script())


def record(text: str) -> SpoolRecord:
    return {"id": uuid.uuid4().hex, "from": "a" * 32, "name": "alice", "text": text,
            "ts": "2026-12-02T06:00:00Z", "kind": "chat"}


def test_output_per_event() -> None:
    assert output_for("AfterAgent", "MAIL") == {"decision": "block", "reason": "MAIL"}
    for event in ("BeforeAgent", "AfterTool"):
        assert output_for(event, "MAIL") == {"hookSpecificOutput": {"hookEventName": event,
                                                                    "additionalContext": "MAIL"}}
    assert output_for("SessionStart", "MAIL") == {} and output_for("AfterAgent", None) == {}


def test_after_tool_takes_what_fits_beside_the_tools_output() -> None:
    small, big = record("short"), record("x" * (TOOL_LIMIT + 1))
    fit = fitter("AfterTool", 0)
    assert fit is not None
    assert fit([small, big]) == (1, Receipt.DELIVERED)
    assert fit([big, small]) == (0, None)  # in order: the long one waits, and so does what follows
    crowded = fitter("AfterTool", TOOL_LIMIT - len(frame([small])) + 1)
    assert crowded is not None and crowded([small]) == (0, None)
    assert fitter("AfterAgent", 0) is None and fitter("BeforeAgent", 10**6) is None  # shown whole


def test_tool_output_size_reads_the_llm_content() -> None:
    assert tool_output_size({"tool_response": {"llmContent": "abc", "returnDisplay": "x" * 99}}) == 3
    assert tool_output_size({"tool_response": {"llmContent": [{"text": "ab"}]}}) == len('[{"text": "ab"}]')
    assert tool_output_size({}) == 0


def test_gemini_is_found_by_its_command_line() -> None:
    assert is_gemini(["/usr/bin/node", "--max-old-space-size=1", "/x/node_modules/.bin/gemini", "-p", "hi"])
    assert is_gemini(["gemini"]) and is_gemini(["node", "/lib/@google/gemini-cli/bundle/gemini.js"])
    assert not is_gemini(["bash", "-c", "python gemini_hook.py"]) and not is_gemini([])
    assert not is_gemini(["node", "/srv/app.js", "gemini"])


def run_hook(folder: Path, event: str, sid: str, **more: Any) -> dict[str, Any]:
    payload = json.dumps({"session_id": sid, "hook_event_name": event, "cwd": str(folder), **more})
    p = subprocess.run([PYTHON, "-I", "-S", HOOK, "--talk-home", str(folder.parent)], input=payload,
                       capture_output=True, text=True, timeout=30)
    assert p.returncode == 0 and p.stderr == "", p.stderr
    out: dict[str, Any] = json.loads(p.stdout)
    return out


def test_session_start_registers_and_before_agent_hands_the_inbox_on_once(folder: Path) -> None:
    msg = record("waiting since before the session")
    Spool(folder / "spool").deliver(msg)  # no session yet: the inbox
    assert run_hook(folder, "SessionStart", "g1") == {}
    sessions = json.loads((folder / "spool" / "sessions.json").read_text())["sessions"]
    assert sessions["g1"]["host"] == "gemini" and sessions["g1"]["pid"] == os.getpid()  # the hook's parent
    out = run_hook(folder, "BeforeAgent", "g1")
    context = out["hookSpecificOutput"]["additionalContext"]
    assert msg["text"] in context and msg["id"] in context and "grant" in context
    assert run_hook(folder, "BeforeAgent", "g1") == {}  # handed on once


def test_after_agent_blocks_once_then_lets_the_turn_end(folder: Path) -> None:
    run_hook(folder, "SessionStart", "g2")
    Spool(folder / "spool").deliver(record("first"))
    out = run_hook(folder, "AfterAgent", "g2")
    assert out["decision"] == "block" and "> first" in out["reason"]
    assert run_hook(folder, "AfterAgent", "g2", stop_hook_active=True) == {}


def test_a_long_message_is_left_by_after_tool_for_after_agent(folder: Path) -> None:
    run_hook(folder, "SessionStart", "g3")
    long = record("y" * 50_000)
    Spool(folder / "spool").deliver(long)
    assert run_hook(folder, "AfterTool", "g3", tool_response={"llmContent": "ok"}) == {}
    out = run_hook(folder, "AfterAgent", "g3")
    assert long["text"] in out["reason"]
    assert run_hook(folder, "AfterAgent", "g3") == {}


def test_a_broken_setup_prints_empty_output_and_logs(tmp_path: Path, folder: Path) -> None:
    p = subprocess.run([PYTHON, "-I", "-S", HOOK, "--talk-home", str(folder.parent)], input="{oops",
                       capture_output=True, text=True, timeout=30)
    assert (p.returncode, p.stdout.strip(), p.stderr) == (0, "{}", "")
    assert "JSONDecodeError" in (folder / gemini_hook.LOG_NAME).read_text()
