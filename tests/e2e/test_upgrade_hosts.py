"""Upgrade: host configs installed before the doors moved to `alarms/hosts/<host>/` keep working.

Each host's config is written with the commands the installers wrote before the move (the
literal strings, old module paths and all); the doors they name must still start and answer a
real hook payload, `talk doctor` must read them without breaking, and `talk install HOST` must
rewrite them to the new paths in place.
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REPO, Agent
from tests.e2e.host_homes import private_home

PY = sys.executable
OLD_HOOK_SCRIPTS = {"codex": REPO / "alarms" / "codex_hook.py", "gemini": REPO / "alarms" / "gemini_hook.py"}


def old_argv(host: str, talk_home: Path, event: str = "") -> list[str]:
    """The command each installer wrote before the move, with bob's identity baked in."""
    tail = ["--talk-home", str(talk_home), "--user", "bob"]
    if host in OLD_HOOK_SCRIPTS:
        return [PY, "-I", "-S", str(OLD_HOOK_SCRIPTS[host]), *tail]
    if host == "copilot":
        return [PY, "-I", "-m", "alarms.copilot_hook", event, *tail]
    if host == "claude":
        return [PY, "-I", "-m", "alarms.claude_hook"]
    raise AssertionError(host)


@pytest.fixture
def home(tmp_path: Path, bob: Agent) -> Path:
    """bob's HOME and every host's config folder in tmp_path; PATH without any host program."""
    return private_home(tmp_path, bob, TALK_USER="bob")


def write(path: Path, doc: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=2) + "\n")


def write_old_configs(home: Path, talk_home: Path) -> None:
    """Each host's config as the installers before the move left it."""
    codex = shlex.join(old_argv("codex", talk_home))
    write(home / ".codex" / "hooks.json", {"hooks": {e: [{"hooks": [
        {"type": "command", "command": codex, "timeout": 10, "statusMessage": "Checking talk mail"}]}]
        for e in ("SessionStart", "UserPromptSubmit", "PostToolUse", "Stop")}})
    gemini = shlex.join(old_argv("gemini", talk_home))
    write(home / ".gemini" / "settings.json", {"hooks": {e: [{"hooks": [
        {"type": "command", "name": "talk", "command": gemini, "timeout": 10000}]}]
        for e in ("SessionStart", "BeforeAgent", "AfterTool", "AfterAgent")},
        "mcpServers": {"talk": {"command": str(Path(PY).parent / "talk"),
                                "args": ["mcp", "--host", "gemini"]}}})
    write(home / ".copilot" / "hooks" / "talk.json", {"version": 1, "hooks": {e: [
        {"type": "command", "bash": shlex.join(old_argv("copilot", talk_home, e)), "timeoutSec": 10}]
        for e in ("sessionStart", "userPromptSubmitted", "postToolUse", "agentStop")}})
    write(home / ".copilot" / "mcp-config.json", {"mcpServers": {"talk": {
        "type": "local", "command": PY, "args": ["-m", "talk", "mcp", "--host", "copilot"], "env": {}}}})
    qwen = shlex.join([PY, "-I", "-m", "alarms.qwen", "--ensure", "--talk-home", str(talk_home),
                       "--user", "bob"])
    write(home / ".qwen" / "settings.json", {"hooks": {"SessionStart": [{"hooks": [
        {"type": "command", "command": qwen, "name": "talk", "timeout": 30}]}]},
        "mcpServers": {"talk": {"command": PY, "args": ["-I", "-m", "talk", "mcp", "--host", "qwen"]}},
        "agents": {"crossSessionInbound": "accept"}})


def run(argv: list[str], env: dict[str, str], stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, input=stdin, capture_output=True, text=True, env=env, timeout=60)


@pytest.mark.parametrize("host", ["codex", "gemini", "copilot", "claude"])
def test_an_old_hook_command_starts_and_answers_a_real_payload(host: str, bob: Agent, home: Path,
                                                             tmp_path: Path) -> None:
    event = {"codex": "Stop", "gemini": "AfterAgent", "copilot": "agentStop", "claude": "Stop"}[host]
    payload: dict[str, Any] = {"hook_event_name": event, "session_id": "old-config-1", "cwd": str(tmp_path),
                               "transcript_path": str(tmp_path / "transcript.jsonl")}
    if host == "copilot":
        payload = {"sessionId": "old-config-1", "cwd": str(tmp_path), "timestamp": 1}
    done = run(old_argv(host, bob.home, event), bob.env(), json.dumps(payload))
    assert done.returncode == 0, done.stderr
    assert isinstance(json.loads(done.stdout), dict), done.stdout
    assert "Traceback" not in done.stderr and "No module named" not in done.stderr, done.stderr
    assert "no mail check" not in done.stderr, done.stderr
    logs = sorted(p.name for p in (bob.home / "bob").glob("*-hook.log"))
    assert logs == [], [(bob.home / "bob" / name).read_text() for name in logs]


@pytest.mark.parametrize("module", ["alarms.pi_door", "alarms.qwen", "alarms.opencode"])
def test_an_old_daemon_door_module_still_starts(module: str, bob: Agent) -> None:
    done = run([PY, "-I", "-m", module, "--help"], bob.env())
    assert done.returncode == 0 and "usage:" in done.stdout, done.stderr


def test_the_old_claude_monitor_module_still_starts(bob: Agent) -> None:
    """Without a session id the monitor says so on stderr and idles while its host lives."""
    import select

    env = {k: v for k, v in bob.env().items() if k != "CLAUDE_CODE_SESSION_ID"}
    monitor = subprocess.Popen([PY, "-I", "-m", "alarms.claude_monitor"], env=env, text=True,
                               stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        assert monitor.stderr is not None
        ready, _, _ = select.select([monitor.stderr], [], [], 30)
        said = monitor.stderr.readline() if ready else ""
        assert "not watching for mail" in said, said
    finally:
        monitor.kill()
        monitor.communicate()


def test_doctor_reads_old_configs_and_install_rewrites_them_in_place(bob: Agent, home: Path) -> None:
    write_old_configs(home, bob.home)
    r = bob.run("doctor", "--json")
    assert "Traceback" not in r.err, r.err
    checks = {c["name"]: c for c in r.json()}
    assert checks["gemini"]["status"] == "ok", checks["gemini"]
    # An install from before talk's Copilot extension: its hooks read fine, and the missing
    # extension (the door that wakes an idle session) is named with the command that adds it.
    copilot = checks["copilot"]
    assert copilot["status"] == "warn" and "extension is missing" in copilot["detail"], copilot
    assert "talk install copilot" in copilot["fix"], copilot
    assert checks["codex"]["detail"].endswith("Codex skips them without a word")  # never trusted here
    assert checks["qwen"]["status"] == "ok", checks["qwen"]

    for host in ("copilot", "qwen", "gemini", "codex"):
        bob.run("install", host, "--json")
    copilot = (home / ".copilot" / "hooks" / "talk.json").read_text()
    assert "alarms.hosts.copilot.hook" in copilot and "alarms.copilot_hook" not in copilot
    hooks = json.loads(copilot)["hooks"]
    assert all(len(hooks[e]) == 1 for e in hooks)  # replaced in place, not added beside
    qwen = json.loads((home / ".qwen" / "settings.json").read_text())
    (group,) = qwen["hooks"]["SessionStart"]
    assert [h["command"].split()[3] for h in group["hooks"]] == ["alarms.hosts.qwen.daemon"]
    for path in (home / ".gemini" / "settings.json", home / ".codex" / "hooks.json"):
        events = json.loads(path.read_text())["hooks"]
        assert all(len(groups) == 1 and len(groups[0]["hooks"]) == 1 for groups in events.values()), events
    r = bob.run("doctor", "--json")
    assert "Traceback" not in r.err, r.err
    after = {c["name"]: c for c in r.json()}
    assert after["copilot"]["status"] == "ok" and after["gemini"]["status"] == "ok", after
