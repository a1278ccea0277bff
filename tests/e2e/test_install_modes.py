"""Attack: another user of the machine adds code to what `talk install` wrote into an agent host.

Under umask 000 (or 002) files and folders made with the process umask are writable by others,
and each host runs what its folders hold (hooks, a plugin, an extension, an MCP server) as the
user. The real `talk install HOST` runs here under umask 000 for every host that writes files
(opencode's alarm writes only into the identity folder, private already); nothing it leaves may
be writable by group or others. Then `talk doctor` must report a host folder made
world-writable afterwards, and `talk doctor --fix` (or the next install) must close it.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import TALK, Agent, Result

INSTALLS = (("claude",), ("codex",), ("copilot",), ("gemini",), ("pi",), ("qwen",))


@pytest.fixture
def home(tmp_path: Path, bob: Agent) -> Path:
    """bob's HOME in tmp_path, every host at its default place there; no host program on PATH."""
    home = tmp_path / "home"
    home.mkdir()
    for name in ("CODEX_HOME", "CLAUDE_CONFIG_DIR", "QWEN_HOME", "GEMINI_CLI_HOME", "COPILOT_HOME",
                 "PI_CODING_AGENT_DIR"):
        bob.extra_env[name] = ""
    bob.extra_env.update(HOME=str(home), PATH=os.pathsep.join([str(Path(sys.executable).parent), "/usr/bin",
                                                                "/bin"]))
    return home


def under_umask_000(agent: Agent, *args: str) -> Result:
    env = {k: v for k, v in agent.env().items() if v != ""}
    p = subprocess.run([TALK, *args], capture_output=True, text=True, env=env, timeout=60,
                       stdin=subprocess.DEVNULL, preexec_fn=lambda: os.umask(0))
    return Result(p.returncode, p.stdout, p.stderr)


def open_to_others(root: Path) -> list[str]:
    paths = [root, *root.rglob("*")]
    return [f"{p} {stat.filemode(p.lstat().st_mode)}" for p in paths
            if not p.is_symlink() and p.lstat().st_mode & (stat.S_IWGRP | stat.S_IWOTH)]


def doctor(agent: Agent, *flags: str) -> dict[str, dict[str, str]]:
    r = agent.run("doctor", "--json", *flags)
    assert "Traceback" not in r.err, r.err
    return {c["name"]: c for c in r.json()}


def test_every_install_under_umask_000_leaves_nothing_others_can_write(home: Path, bob: Agent) -> None:
    for install in INSTALLS:
        r = under_umask_000(bob, "install", *install)
        # Codex's hooks are written before it looks for the codex program to record their trust.
        assert r.code == 0 or (install == ("codex",) and "NO codex program found" in r.err), (install, r.err)
    plugin = bob.home / "claude-plugin"
    written = [plugin / "scripts" / "claude_hook.sh", plugin / "talk.env", home / ".codex" / "hooks.json",
               home / ".copilot" / "hooks" / "talk.json", home / ".copilot" / "mcp-config.json",
               home / ".gemini" / "settings.json", home / ".qwen" / "settings.json",
               home / ".pi" / "agent" / "extensions" / "talk" / "talk.json",
               home / ".pi" / "agent" / "mcp.json"]
    assert [p for p in written if not p.is_file()] == []
    assert open_to_others(home) == [] and open_to_others(plugin) == []
    assert stat.S_IMODE((home / ".pi").stat().st_mode) == 0o700  # a parent made on the way, too
    assert stat.S_IMODE((plugin / "scripts" / "claude_hook.sh").stat().st_mode) == 0o700
    assert stat.S_IMODE((home / ".gemini" / "settings.json").stat().st_mode) == 0o600
    assert doctor(bob)["host files"]["status"] == "ok"


def test_doctor_reports_a_host_folder_others_can_write_and_fix_closes_it(home: Path, bob: Agent) -> None:
    bob.ok("install", "gemini")
    gemini = home / ".gemini"
    gemini.chmod(0o777)  # as a careless chmod or a shared setup leaves it
    found = doctor(bob)["gemini files"]
    assert found["status"] == "fail" and str(gemini) in found["detail"]
    assert found["fix"] == "talk doctor --fix"
    human = bob.run("doctor").out
    assert f"fail  gemini files: other users can write to {gemini}" in human
    fixed = doctor(bob, "--fix")["gemini files"]
    assert fixed["status"] == "ok" and stat.S_IMODE(gemini.stat().st_mode) == 0o755
    assert doctor(bob)["host files"]["status"] == "ok"


def test_the_next_install_closes_a_host_folder_others_can_write(home: Path, bob: Agent) -> None:
    qwen = home / ".qwen"
    qwen.mkdir(mode=0o700)
    qwen.chmod(0o777)
    (qwen / "settings.json").write_text("{}")
    (qwen / "settings.json").chmod(0o666)
    bob.ok("install", "qwen")
    assert open_to_others(qwen) == []
    assert stat.S_IMODE((qwen / "settings.json").stat().st_mode) == 0o644  # its mode, less others' write
