"""alarms.hosts.copilot.install: merging talk's hooks and MCP server into Copilot CLI's config, and out."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from alarms.door import Request
from alarms.hosts.copilot.install import (
    EVENTS,
    extension_dir,
    handler_for,
    hook_argv,
    is_talk_handler,
    merge_hooks,
    merge_servers,
    server_entry,
    unmerge_hooks,
    unmerge_servers,
    wiring,
)
from alarms.hosts.copilot.install import install as install_copilot
from alarms.wiring import State

THEIRS = {"type": "command", "bash": "/usr/bin/notify-me", "timeoutSec": 5}
HANDLERS = {e: handler_for(hook_argv("/py", e, "/th", "bob")) for e in EVENTS}


def test_hook_command_runs_the_module_isolated_with_the_install_time_identity() -> None:
    assert hook_argv("/py", "agentStop", "/th", "bob") == [
        "/py", "-I", "-m", "alarms.hosts.copilot.hook", "agentStop", "--talk-home", "/th", "--user", "bob"]
    bare = ["/py", "-I", "-m", "alarms.hosts.copilot.hook", "postToolUse"]
    assert hook_argv("/py", "postToolUse", None, None) == bare


def test_merge_keeps_other_hooks_is_idempotent_and_replaces_talks_in_place() -> None:
    doc: dict[str, Any] = {"version": 1, "hooks": {"agentStop": [THEIRS], "preToolUse": [THEIRS]}}
    once = merge_hooks(doc, HANDLERS)
    assert once["hooks"]["agentStop"] == [THEIRS, HANDLERS["agentStop"]]
    assert once["hooks"]["preToolUse"] == [THEIRS]
    assert merge_hooks(once, HANDLERS) == once
    old = {"type": "command", "bash": "python3 -m alarms.hosts.copilot.hook agentStop"}
    moved = merge_hooks({"hooks": {"agentStop": [old, THEIRS, dict(old)]}}, HANDLERS)
    assert moved["hooks"]["agentStop"] == [HANDLERS["agentStop"], THEIRS]
    assert doc["hooks"]["agentStop"] == [THEIRS]  # the input is not changed


def test_unmerge_leaves_the_rest_or_nothing() -> None:
    merged = merge_hooks({"hooks": {"agentStop": [THEIRS]}}, HANDLERS)
    assert unmerge_hooks(merged) == {"version": 1, "hooks": {"agentStop": [THEIRS]}}
    assert unmerge_hooks(merge_hooks({}, HANDLERS)) is None
    assert not any(is_talk_handler(h) for h in [THEIRS])


def test_merge_refuses_shapes_copilot_would_refuse() -> None:
    shapes: list[dict[str, Any]] = [{"version": 2}, {"hooks": []}, {"hooks": {"agentStop": {}}}]
    for bad in shapes:
        with pytest.raises(ValueError):
            merge_hooks(bad, HANDLERS)
    with pytest.raises(ValueError):
        merge_servers({"mcpServers": []}, {})


def test_servers_merge_and_unmerge() -> None:
    entry = server_entry("/py", "/th", None)
    assert entry["args"] == ["-m", "talk", "mcp", "--host", "copilot"]
    assert entry["env"] == {"TALK_HOME": "/th"}
    doc = {"mcpServers": {"other": {"command": "x"}}, "extra": 1}
    merged = merge_servers(doc, entry)
    assert merged["mcpServers"] == {"other": {"command": "x"}, "talk": entry}
    assert merge_servers(merged, entry) == merged
    assert unmerge_servers(merged) == doc
    assert unmerge_servers(merge_servers({}, entry)) is None


def test_install_writes_the_extension_and_doctor_misses_it_when_gone(tmp_path: Path) -> None:
    home = tmp_path / "copilot"
    env = {"TALK_HOME": str(tmp_path / "talk"), "HOME": str(tmp_path)}
    done = install_copilot(Request(python=sys.executable, env=env, where=home))
    folder = extension_dir(home.resolve())
    assert done.data["extension_dir"] == str(folder) and (folder / "extension.mjs").is_file()
    assert json.loads((folder / "talk.json").read_text())["python"] == sys.executable
    assert wiring(home).state is State.WIRED and str(folder) in wiring(home).detail
    (folder / "extension.mjs").unlink()
    missing = wiring(home)
    assert missing.state is State.INCOMPLETE and "extension" in missing.detail and missing.fix
