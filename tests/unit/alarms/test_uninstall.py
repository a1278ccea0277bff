"""`talk uninstall HOST` for every host in the registry: install, then uninstall, leaves the host's
folders exactly as they were, the user's own hooks, servers and settings included; uninstalling
again changes nothing, and so does installing twice."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from alarms.door import Request
from alarms.registry import NAMES, host_of

USER_HOOK = {"type": "command", "command": "echo the user's own", "timeout": 5}


def write(path: Path, doc: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=2) + "\n")


def user_config(name: str, root: Path) -> Path | None:
    """The host's folder as the user had it, with hooks, servers and settings of their own; where
    `talk install` is to write (None: its default under TALK_HOME)."""
    if name == "claude":
        return root / "plugin"
    if name == "codex":
        hooks = {"Stop": [{"hooks": [USER_HOOK]}], "PreToolUse": [{"matcher": "x", "hooks": [USER_HOOK]}]}
        write(root / "codex" / "hooks.json", {"hooks": hooks})
        (root / "codex" / "config.toml").write_text('model = "m"\n')
        return root / "codex"
    if name == "copilot":
        mine = {"version": 1, "hooks": {"agentStop": [{"bash": "x"}]}}
        write(root / "copilot" / "hooks" / "mine.json", mine)
        write(root / "copilot" / "mcp-config.json", {"mcpServers": {"mine": {"command": "m"}}})
        return root / "copilot"
    if name == "gemini":
        write(root / "gemini" / "settings.json", {"theme": "dark", "mcpServers": {"mine": {"command": "m"}},
                                                  "hooks": {"AfterAgent": [{"hooks": [USER_HOOK]}]}})
        return root / "gemini" / "settings.json"
    if name == "pi":
        write(root / "pi" / "mcp.json", {"mcpServers": {"mine": {"command": "m"}}})
        write(root / "pi" / "extensions" / "mine" / "index.ts", "export default () => {}")
        return root / "pi"
    if name == "qwen":
        write(root / "qwen" / "settings.json", {"mcpServers": {"mine": {"command": "m"}}, "ui": {"x": 1},
                                                "hooks": {"SessionStart": [{"hooks": [USER_HOOK]}]}})
        return root / "qwen"
    return None  # opencode: nothing is written into the host's config


def snapshot(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): p.read_text() if p.is_file() else "/"
            for p in sorted(root.rglob("*"))}


@pytest.mark.parametrize("name", NAMES)
def test_uninstall_takes_out_exactly_what_install_wrote(name: str, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    import alarms.hosts.codex.install

    monkeypatch.setattr(alarms.hosts.codex.install, "find_codex", lambda given: None)  # trust is Codex's step
    talk_home = tmp_path / "talk"
    write(talk_home / "bob" / "identity.json", {})
    hosts = tmp_path / "hosts"
    hosts.mkdir()
    where = user_config(name, hosts)
    before = snapshot(hosts)
    env = {"TALK_HOME": str(talk_home), "HOME": str(tmp_path), "PATH": str(Path(sys.executable).parent)}
    request = Request(python=sys.executable, env=env, where=where)
    host = host_of(name)

    host.install_doors(request)
    installed = snapshot(hosts)
    assert name == "opencode" or installed != before
    host.install_doors(request)
    assert snapshot(hosts) == installed  # installing twice changes nothing

    host.uninstall_doors(request)
    assert snapshot(hosts) == before
    again = host.uninstall_doors(request)
    assert snapshot(hosts) == before and "removed" not in again.said.split(";")[0]


@pytest.mark.parametrize("name", NAMES)
def test_uninstall_after_installing_into_nothing_leaves_no_file(name: str, tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """Files install made go again; folders it made may stay (a folder of the user's may look alike)."""
    import alarms.hosts.codex.install

    monkeypatch.setattr(alarms.hosts.codex.install, "find_codex", lambda given: None)
    talk_home = tmp_path / "talk"
    write(talk_home / "bob" / "identity.json", {})
    hosts = tmp_path / "hosts"
    hosts.mkdir()
    where = {"gemini": hosts / "gemini" / "settings.json"}.get(name, hosts / name)
    env = {"TALK_HOME": str(talk_home), "HOME": str(tmp_path), "PATH": str(Path(sys.executable).parent)}
    request = Request(python=sys.executable, env=env, where=where)
    host_of(name).install_doors(request)
    host_of(name).uninstall_doors(request)
    assert [p for p in hosts.rglob("*") if p.is_file()] == []
