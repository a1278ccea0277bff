"""`talk doctor` on each agent host's wiring, through the real CLI: in a throwaway HOME, the real
`talk install HOST` runs (no host program needed), doctor says ok; then the wiring is broken the
ways it breaks in use (an entry deleted, a file corrupted, a program gone, a Codex hook never
trusted) and doctor says warn or fail, names the file, and gives the command that fixes it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Agent, Result
from tests.e2e.host_homes import private_home

HOSTS = ("claude", "codex", "pi", "qwen", "gemini", "copilot", "opencode")
GONE = "/nonexistent/bin/python3"


@pytest.fixture
def home(tmp_path: Path, bob: Agent) -> Path:
    """bob's HOME and every host's config folder in tmp_path; PATH without any host program."""
    return private_home(tmp_path, bob)


def doctor(agent: Agent) -> tuple[int, dict[str, dict[str, Any]]]:
    r = agent.run("doctor", "--json")
    assert "Traceback" not in r.err, r.err
    return r.code, {c["name"]: c for c in r.json()}


def host(agent: Agent, name: str) -> tuple[int, dict[str, Any]]:
    code, found = doctor(agent)
    return code, found[name]


def edit_json(path: Path, change: Callable[[dict[str, Any]], None]) -> None:
    doc = json.loads(path.read_text())
    change(doc)
    path.write_text(json.dumps(doc))


def repoint(path: Path, old: str, new: str = GONE) -> None:
    """Make talk's entries in `path` run a program that is not there (talk's venv deleted)."""
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new))


def test_a_host_that_is_not_there_is_not_a_problem(bob: Agent, home: Path) -> None:
    code, found = doctor(bob)
    assert code == 0, found
    for name in HOSTS:
        assert found[name]["status"] == "ok" and found[name]["fix"] == "", found[name]
    assert "not installed" in found["codex"]["detail"] and str(home / ".codex") in found["codex"]["detail"]
    assert set(found["codex"]) == {"name", "status", "detail", "fix"}
    assert not any(name in bob.ok("doctor", "--problems").out for name in HOSTS)


def test_a_host_talk_was_never_installed_into_is_not_a_problem(bob: Agent, home: Path) -> None:
    (home / ".qwen").mkdir()
    (home / ".qwen" / "settings.json").write_text('{"theme": "dark"}')
    code, qwen = host(bob, "qwen")
    assert code == 0 and qwen["status"] == "ok" and "not installed" in qwen["detail"], qwen


def trust_all(codex: Path) -> None:
    """What Codex's /hooks review records: a trusted hash under each of talk's hook keys."""
    keys = [f"{codex / 'hooks.json'}:{event}:0:0"
            for event in ("session_start", "user_prompt_submit", "post_tool_use", "stop")]
    (codex / "config.toml").write_text("".join(f'[hooks.state."{k}"]\ntrusted_hash = "sha256:00"\n\n'
                                               for k in keys))


def test_codex_untrusted_then_trusted_then_broken(bob: Agent, home: Path) -> None:
    codex = (home / ".codex").resolve()
    r = bob.run("install", "codex")  # no codex program: hooks written, not trusted
    assert r.code == 1 and "NOT trusted" in r.err
    code, found = host(bob, "codex")
    assert code == 0 and found["status"] == "warn" and "not trusted" in found["detail"], found
    assert "talk install codex" in found["fix"] and "/hooks" in found["fix"]

    trust_all(codex)
    code, found = host(bob, "codex")
    assert code == 0 and found["status"] == "ok" and "trusted" in found["detail"], found

    edit_json(codex / "hooks.json", lambda doc: doc["hooks"].pop("Stop"))
    code, found = host(bob, "codex")
    assert (code, found["status"], found["fix"]) == (0, "warn", "talk install codex"), found
    assert "Stop" in found["detail"]

    repoint(codex / "hooks.json", sys.executable)
    code, found = host(bob, "codex")
    assert (code, found["status"], found["fix"]) == (1, "fail", "talk install codex"), found
    assert GONE in found["detail"]

    (codex / "hooks.json").write_text('{"hooks": {')
    code, found = host(bob, "codex")
    assert (code, found["status"]) == (0, "warn") and str(codex / "hooks.json") in found["detail"], found


def test_codex_corrupt_config_toml_is_named(bob: Agent, home: Path) -> None:
    bob.run("install", "codex")
    (home / ".codex" / "config.toml").write_text("[hooks.state\n")
    code, found = host(bob, "codex")
    assert (code, found["status"]) == (0, "warn") and "config.toml" in found["detail"], found


def enable_plugin(home: Path, plugin: Path, on: bool = True) -> None:
    """What `claude plugin marketplace add DIR` and `claude plugin install talk@talk-local` record."""
    config = home / ".claude"
    config.mkdir(exist_ok=True)
    (config / "settings.json").write_text(json.dumps({
        "extraKnownMarketplaces": {"talk-local": {"source": {"source": "directory", "path": str(plugin)}}},
        "enabledPlugins": {"talk@talk-local": on}}))


def test_claude_plugin_copied_then_installed_then_broken(bob: Agent, home: Path) -> None:
    plugin = Path(bob.ok("install", "claude", "--json").json()["plugin_dir"])
    code, found = host(bob, "claude")
    assert (code, found["status"]) == (0, "warn") and "--plugin-dir" in found["detail"], found
    assert found["fix"] == f"claude plugin marketplace add {plugin} && claude plugin install talk@talk-local"

    enable_plugin(home, plugin)
    code, found = host(bob, "claude")
    assert (code, found["status"]) == (0, "ok") and str(plugin) in found["detail"], found

    enable_plugin(home, plugin, on=False)
    code, found = host(bob, "claude")
    assert (code, found["status"], found["fix"]) == (0, "warn", "claude plugin enable talk@talk-local"), found

    enable_plugin(home, plugin)
    repoint(plugin / "talk.env", sys.executable)
    code, found = host(bob, "claude")
    assert (code, found["status"], found["fix"]) == (1, "fail", "talk install claude"), found

    (home / ".claude" / "settings.json").write_text("not json")
    code, found = host(bob, "claude")
    assert (code, found["status"]) == (0, "warn") and "settings.json" in found["detail"], found


def test_pi_installed_then_broken(bob: Agent, home: Path) -> None:
    bob.ok("install", "pi")
    agent = home / ".pi" / "agent"
    code, found = host(bob, "pi")
    assert (code, found["status"]) == (0, "ok") and "MCP server" in found["detail"], found

    repoint(agent / "extensions" / "talk" / "talk.json", sys.executable)
    code, found = host(bob, "pi")
    assert (code, found["status"], found["fix"]) == (1, "fail", "talk install pi"), found

    bob.ok("install", "pi")
    (agent / "extensions" / "talk" / "index.ts").unlink()
    code, found = host(bob, "pi")
    assert (code, found["status"], found["fix"]) == (0, "warn", "talk install pi"), found


def test_qwen_installed_then_broken(bob: Agent, home: Path) -> None:
    bob.ok("install", "qwen")
    settings = home / ".qwen" / "settings.json"
    code, found = host(bob, "qwen")
    assert (code, found["status"]) == (0, "ok"), found

    edit_json(settings, lambda doc: doc.pop("mcpServers"))
    code, found = host(bob, "qwen")
    assert (code, found["status"], found["fix"]) == (0, "warn", "talk install qwen"), found
    assert "MCP server" in found["detail"]

    settings.write_text("[1, 2]")
    code, found = host(bob, "qwen")
    assert (code, found["status"]) == (0, "warn") and str(settings.resolve()) in found["detail"], found


def test_gemini_installed_then_broken(bob: Agent, home: Path) -> None:
    bob.ok("install", "gemini")
    settings = home / ".gemini" / "settings.json"
    code, found = host(bob, "gemini")
    assert (code, found["status"]) == (0, "ok"), found

    edit_json(settings, lambda doc: doc["hooks"].pop("AfterTool"))
    code, found = host(bob, "gemini")
    assert (code, found["status"]) == (0, "warn") and "AfterTool" in found["detail"], found

    repoint(settings, sys.executable)
    code, found = host(bob, "gemini")
    assert (code, found["status"], found["fix"]) == (1, "fail", "talk install gemini"), found


def test_copilot_installed_then_broken(bob: Agent, home: Path) -> None:
    bob.ok("install", "copilot")
    copilot = home / ".copilot"
    code, found = host(bob, "copilot")
    assert (code, found["status"]) == (0, "ok"), found

    repoint(copilot / "mcp-config.json", sys.executable)
    code, found = host(bob, "copilot")
    assert (code, found["status"]) == (1, "fail") and "MCP server" in found["detail"], found

    (copilot / "hooks" / "talk.json").write_text('{"version": 2}')
    code, found = host(bob, "copilot")
    assert (code, found["status"]) == (0, "warn") and "talk.json" in found["detail"], found


def register_claude_session(agent: Agent) -> None:
    """What the plugin's SessionStart hook does when Claude Code starts a session."""
    env = {**agent.env(), "CLAUDE_PID": str(os.getpid())}
    payload = json.dumps({"hook_event_name": "SessionStart", "session_id": "s-1"})
    subprocess.run([sys.executable, "-I", "-m", "alarms.hosts.claude.hook"], input=payload, env=env,
                   capture_output=True, text=True, check=True, timeout=30)


def alarm_of(agent: Agent) -> str:
    r: Result = agent.ok("status", "--json")
    (session,) = r.json()["sessions"]
    return str(session["door"])


def test_status_names_what_wakes_a_claude_session(bob: Agent, home: Path) -> None:
    register_claude_session(bob)
    alarm = alarm_of(bob)
    assert "not installed in Claude Code" in alarm and "monitor" not in alarm, alarm
    plugin = Path(bob.ok("install", "claude", "--json").json()["plugin_dir"])
    enable_plugin(home, plugin)
    assert "monitor" in alarm_of(bob)
    assert "Claude Code plugin: its monitor" in bob.ok("status").out


def test_status_says_when_a_wired_host_with_no_live_session_can_take_mail(bob: Agent, home: Path) -> None:
    """A just-started session of some hosts cannot take mail before its first prompt: `talk
    status` names, for each host talk is wired into and no session of which is live, when a new
    session becomes reachable; a host talk is not wired into is not listed."""
    from alarms.registry import host_of

    assert bob.run("install", "gemini").code == 0
    bob.run("install", "codex")  # no codex program: hooks written, not trusted (exit 1)
    report = bob.ok("status", "--json").json()
    rows = {row["host"]: row for row in report["waiting_hosts"]}
    assert set(rows) == {"gemini", "codex"}, rows
    for name, row in rows.items():
        assert row["reach"] == host_of(name).REACH and row["wiring"] in ("wired", "untrusted"), row
    said = bob.ok("status").out
    assert f"Gemini CLI: wired, no live session; a new one takes mail {host_of('gemini').REACH}" in said
