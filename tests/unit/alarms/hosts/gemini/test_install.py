"""`talk install gemini`'s merge into settings.json and `talk uninstall gemini`'s removal."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from alarms.hosts.gemini.install import (
    EVENTS,
    handler_for,
    mcp_entry,
    merge_settings,
    remove_settings,
    settings_path,
)

COMMAND = "/usr/bin/python3 -I -S /site/alarms/gemini_hook.py --talk-home /h"
MCP = mcp_entry("/venv/bin/talk", "/h", None)


def test_merge_keeps_everything_else_and_is_idempotent() -> None:
    lint = {"matcher": "write_file", "hooks": [{"type": "command", "command": "lint"}]}
    theirs: dict[str, Any] = {"hooks": {"AfterTool": [lint]},
              "mcpServers": {"other": {"command": "srv"}}, "model": {"name": "gemini-2.5-pro"}}
    merged = merge_settings(theirs, COMMAND, MCP)
    assert merged["hooks"]["AfterTool"][0] == theirs["hooks"]["AfterTool"][0]
    assert all(merged["hooks"][e][-1] == {"hooks": [handler_for(COMMAND)]} for e in EVENTS)
    assert merged["mcpServers"] == {"other": {"command": "srv"}, "talk": MCP}
    assert merged["model"] == theirs["model"]
    assert merge_settings(merged, COMMAND, MCP) == merged
    assert MCP["args"] == ["mcp", "--host", "gemini"] and MCP["env"] == {"TALK_HOME": "/h"}


def test_a_new_install_replaces_the_old_handler_in_place() -> None:
    old = merge_settings({}, COMMAND.replace("/usr/bin/python3", "/old/python"), MCP)
    new = merge_settings(old, COMMAND, MCP)
    assert all(new["hooks"][e] == [{"hooks": [handler_for(COMMAND)]}] for e in EVENTS)


def test_uninstall_takes_out_only_talk() -> None:
    theirs = {"hooks": {"AfterTool": [{"hooks": [{"type": "command", "command": "lint"}]}]},
              "mcpServers": {"other": {"command": "srv"}}, "ui": {"hideTips": True}}
    assert remove_settings(merge_settings(theirs, COMMAND, MCP)) == theirs
    assert remove_settings(merge_settings({}, COMMAND, MCP)) == {}
    assert remove_settings(theirs) == theirs


def test_shapes_gemini_would_refuse_are_refused() -> None:
    with pytest.raises(ValueError, match=r"hooks\.AfterTool"):
        merge_settings({"hooks": {"AfterTool": {"command": "x"}}}, COMMAND, MCP)
    with pytest.raises(ValueError, match="mcpServers"):
        merge_settings({"mcpServers": []}, COMMAND, MCP)


def test_settings_path_follows_gemini_cli_home() -> None:
    assert settings_path({"HOME": "/home/u"}) == Path("/home/u/.gemini/settings.json")
    assert settings_path({"HOME": "/home/u", "GEMINI_CLI_HOME": "/g"}) == Path("/g/.gemini/settings.json")
