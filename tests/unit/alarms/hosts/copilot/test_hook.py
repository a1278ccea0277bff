"""alarms.hosts.copilot.hook: its decisions, and the hook as Copilot CLI runs it (a real process, the
documented camelCase payloads on stdin) against a real spool."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

from alarms.framing import channel_note
from alarms.hosts.copilot.hook import (
    CHANNELS,
    POST_TOOL_LIMIT,
    WHOLE_LIMIT,
    fit_for,
    log_caught_up,
    output_for,
    parse_payload,
    transcript_path,
)
from alarms.mailbox import SessionMail
from durable.receipt_states import Receipt
from spool_writer.layout import SpoolLayout
from spool_writer.record import SpoolRecord
from spool_writer.spool import Spool
from tests.unit.samples import handed_states


def record(text: str) -> SpoolRecord:
    return {"id": uuid.uuid4().hex, "from": "a" * 32, "name": "alice", "text": text,
            "ts": "2026-11-29T15:00:00Z", "kind": "chat"}


def test_payload_gives_session_cwd_and_transcript() -> None:
    raw = json.dumps({"sessionId": "0429f0bd", "timestamp": 1, "cwd": "/p",
                      "transcriptPath": "/t/events.jsonl", "stopReason": "end_turn"})
    assert parse_payload(raw) == ("0429f0bd", "/p", "/t/events.jsonl", 0.001)
    assert parse_payload(json.dumps({"sessionId": "s", "prompt": "hi"})) == ("s", None, None, None)
    for bad in ("[]", "{}", '{"sessionId": ""}', "not json"):
        with pytest.raises(ValueError):
            parse_payload(bad)


def test_the_event_log_has_caught_up_once_written_at_or_after_the_event() -> None:
    assert log_caught_up(100.0, 100.0) and log_caught_up(100.2, 100.0)
    assert not log_caught_up(99.9, 100.0) and not log_caught_up(None, 100.0)


def test_transcript_is_the_payloads_else_copilots_event_log() -> None:
    assert transcript_path("s1", "/given", {}) == "/given"
    assert transcript_path("s1", None, {"HOME": "/h"}) == "/h/.copilot/session-state/s1/events.jsonl"
    own_home = {"HOME": "/h", "COPILOT_HOME": "/c"}
    assert transcript_path("s1", None, own_home) == "/c/session-state/s1/events.jsonl"


def test_output_per_event() -> None:
    assert output_for("agentStop", "MAIL") == {"decision": "block", "reason": "MAIL"}
    assert output_for("postToolUse", "MAIL") == {"additionalContext": "MAIL"}
    assert output_for("userPromptSubmitted", "MAIL") == {"additionalContext": "MAIL"}
    assert output_for("agentStop", None) == {}  # nothing waits: Copilot may stop, so a stop never loops
    assert output_for("sessionStart", "MAIL") == {}


def test_after_a_tool_only_what_copilot_keeps_whole_the_rest_waits() -> None:
    short, long = record("short"), record("x" * POST_TOOL_LIMIT)
    assert fit_for("postToolUse")([short, long]) == (1, Receipt.DELIVERED)
    assert fit_for("postToolUse")([long]) == (0, None)
    assert fit_for("agentStop")([long, short]) == (2, Receipt.DELIVERED)
    assert fit_for("agentStop")([record("y" * WHOLE_LIMIT)]) == (1, Receipt.WRITTEN)  # never seen whole


def run_hook(folder: Path, event: str, payload: dict[str, Any], home: Path) -> dict[str, Any]:
    done = subprocess.run([sys.executable, "-I", "-m", "alarms.hosts.copilot.hook", event, "--talk-home",
                           str(folder.parent)], input=json.dumps(payload), capture_output=True, text=True,
                          timeout=60, env={"HOME": str(home), "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0 and done.stderr == "", done.stderr
    out: dict[str, Any] = json.loads(done.stdout)
    return out


def test_session_start_registers_and_leaves_the_mail_for_the_prompt(folder: Path, tmp_path: Path) -> None:
    spool = Spool(folder / "spool")
    spool.deliver(msg := record("waiting since before the session"))
    assert run_hook(folder, "sessionStart", {"sessionId": "s1", "source": "new"}, tmp_path) == {}
    mail = SessionMail(folder, "s1")
    assert mail.registered()
    out = run_hook(folder, "userPromptSubmitted", {"sessionId": "s1", "prompt": "hi"}, tmp_path)
    assert msg["id"] in out["additionalContext"] and "grant" in out["additionalContext"]
    assert channel_note(CHANNELS["userPromptSubmitted"]) in out["additionalContext"]  # a system reminder
    assert run_hook(folder, "userPromptSubmitted", {"sessionId": "s1", "prompt": "again"}, tmp_path) == {}
    assert handed_states(SpoolLayout(folder / "spool"), msg["id"]) == [Receipt.DELIVERED]


def test_stop_blocks_once_then_lets_copilot_stop(folder: Path, tmp_path: Path) -> None:
    run_hook(folder, "sessionStart", {"sessionId": "s2"}, tmp_path)
    Spool(folder / "spool").deliver(msg := record("at the end of the turn"))
    out = run_hook(folder, "agentStop", {"sessionId": "s2", "stopReason": "end_turn"}, tmp_path)
    assert out["decision"] == "block" and msg["id"] in out["reason"]
    assert "NOTE: your host" not in out["reason"]  # a plain prompt: nothing to warn of
    assert run_hook(folder, "agentStop", {"sessionId": "s2", "stopReason": "end_turn"}, tmp_path) == {}


def test_too_long_after_a_tool_is_left_for_the_stop(folder: Path, tmp_path: Path) -> None:
    run_hook(folder, "sessionStart", {"sessionId": "s3"}, tmp_path)
    Spool(folder / "spool").deliver(msg := record("z" * 20_000))
    assert run_hook(folder, "postToolUse", {"sessionId": "s3", "toolName": "bash"}, tmp_path) == {}
    out = run_hook(folder, "agentStop", {"sessionId": "s3"}, tmp_path)
    assert msg["text"] in out["reason"]


def test_a_broken_payload_prints_empty_output_and_logs(folder: Path, tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-I", "-m", "alarms.hosts.copilot.hook", "agentStop",
                           "--talk-home",
                           str(folder.parent)], input="not json", capture_output=True, text=True, timeout=60,
                          env={"HOME": str(tmp_path), "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0 and json.loads(done.stdout) == {}
    assert "JSONDecodeError" in (folder / "copilot-hook.log").read_text()


def test_only_a_batch_missing_from_the_event_log_is_worth_waiting_for(folder: Path, tmp_path: Path) -> None:
    from alarms import handover
    from alarms.hosts.copilot.hook import unseen_batches

    layout = SpoolLayout(folder / "spool")
    log = tmp_path / "events.jsonl"
    log.write_text("")
    assert not unseen_batches(layout.sessions_dir, "s4", str(log))  # nothing pending
    run_hook(folder, "sessionStart", {"sessionId": "s4"}, tmp_path)
    Spool(folder / "spool").deliver(msg := record("taken"))
    assert [r["id"] for r in handover.take(layout, "s4", str(log), record=True)] == [msg["id"]]
    assert unseen_batches(layout.sessions_dir, "s4", str(log))
    shown = {"additionalContext": f"id {msg['id']}"}
    log.write_text(json.dumps({"type": "hook.end", "data": {"output": shown}}))
    assert not unseen_batches(layout.sessions_dir, "s4", str(log))
