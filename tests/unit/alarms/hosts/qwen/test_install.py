"""`talk install qwen`'s edit of Qwen Code's settings.json: merged in, and taken out, leaving the rest."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from alarms.host_config import read_config, write_config
from alarms.hosts.qwen.install import (
    accept_peers,
    hook_command,
    mcp_entry,
    merge,
    restore_peers,
    unmerge,
)

COMMAND = hook_command("/py", "/talk home", "bob")
SERVER = mcp_entry("/py", "/talk home", "bob")


def test_the_hook_and_server_name_talks_interpreter_and_identity() -> None:
    assert COMMAND == "/py -I -m alarms.hosts.qwen.daemon --ensure --talk-home '/talk home' --user bob"
    assert SERVER == {"command": "/py", "args": ["-I", "-m", "talk", "mcp", "--host", "qwen"],
                      "env": {"TALK_HOME": "/talk home", "TALK_USER": "bob"}}
    assert "env" not in mcp_entry("/py", None, None)


def test_merge_keeps_what_is_there_replaces_its_own_and_unmerge_restores() -> None:
    mine = {"type": "command", "command": "echo mine"}
    doc: dict[str, Any] = {"model": {"name": "m"}, "mcpServers": {"other": {"command": "x"}},
                           "hooks": {"SessionStart": [{"hooks": [mine]}], "Stop": [{"hooks": [mine]}]}}
    once = merge(doc, COMMAND, SERVER)
    assert merge(once, COMMAND, SERVER) == once
    moved = merge(once, hook_command("/py2", None, None), SERVER)
    starts = [h["command"] for g in moved["hooks"]["SessionStart"] for h in g["hooks"]]
    assert starts == ["echo mine", "/py2 -I -m alarms.hosts.qwen.daemon --ensure"]
    assert once["mcpServers"] == {"other": {"command": "x"}, "talk": SERVER}
    assert unmerge(once) == doc and unmerge(moved) == doc
    assert unmerge(merge({}, COMMAND, SERVER)) == {}
    assert doc["hooks"]["SessionStart"] == [{"hooks": [mine]}]  # the input is never changed


def test_shapes_qwen_would_refuse_are_reported() -> None:
    bad: dict[str, Any]
    for bad in ({"hooks": []}, {"hooks": {"SessionStart": {}}}, {"hooks": {"SessionStart": [1]}},
                {"mcpServers": []}):
        with pytest.raises(ValueError):
            merge(bad, COMMAND, SERVER)


def test_settings_are_read_as_json_and_written_only_when_changed(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    assert read_config(path, "talk install qwen") == {}
    path.write_text("// a comment\n{}")
    with pytest.raises(Exception, match="not valid JSON"):
        read_config(path, "talk install qwen")
    path.write_text("[]")
    with pytest.raises(Exception, match="JSON object"):
        read_config(path, "talk install qwen")
    path.write_text("{}")
    path.chmod(0o644)
    assert write_config(path, {"a": 1}, 0o600) and not write_config(path, {"a": 1}, 0o600)
    assert json.loads(path.read_text()) == {"a": 1} and path.stat().st_mode & 0o777 == 0o644


def test_peer_messages_are_accepted_only_where_the_user_set_no_policy() -> None:
    doc: dict[str, Any] = {"agents": {"other": 1}}
    accepted, did = accept_peers(doc)
    assert did and accepted == {"agents": {"other": 1, "crossSessionInbound": "accept"}}
    assert restore_peers(accepted) == doc and doc == {"agents": {"other": 1}}
    assert accept_peers({}) == ({"agents": {"crossSessionInbound": "accept"}}, True)
    assert restore_peers(accept_peers({})[0]) == {}
    for policy in ("hold", "refuse", "accept", "bogus"):
        mine = {"agents": {"crossSessionInbound": policy}}
        assert accept_peers(mine) == (mine, False)
    changed_since = {"agents": {"crossSessionInbound": "hold"}}
    assert restore_peers(changed_since) == changed_since
    assert restore_peers({"agents": []}) == {"agents": []}
    with pytest.raises(ValueError):
        accept_peers({"agents": []})
