"""`talk install pi` / `talk uninstall pi` on files: the extension, talk.json and the MCP entry
merged into pi's mcp.json beside other servers, and removed again leaving them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from alarms.hosts.pi.install import (
    CONFIG_FILE,
    agent_dir,
    extension_source,
    install_into,
    merged,
    server_entry,
    uninstall_from,
)
from durable.errors import UserError

PYTHON = "/opt/talk/bin/python"


def test_the_extension_ships_inside_the_package() -> None:
    assert (extension_source() / "index.ts").is_file()


def test_the_agent_folder_is_the_option_else_pi_s_variable_else_home(tmp_path: Path) -> None:
    assert agent_dir(tmp_path / "given", {"PI_CODING_AGENT_DIR": "/x"}) == (tmp_path / "given").resolve()
    assert agent_dir(None, {"PI_CODING_AGENT_DIR": str(tmp_path / "env")}) == (tmp_path / "env").resolve()
    assert agent_dir(None, {"HOME": str(tmp_path)}) == (tmp_path / ".pi" / "agent").resolve()


def test_install_writes_the_extension_and_merges_the_server_beside_others(tmp_path: Path) -> None:
    agent = tmp_path / "agent"
    agent.mkdir()
    other = {"command": "npx", "args": ["-y", "some-server"]}
    (agent / "mcp.json").write_text(json.dumps({"mcpServers": {"fs": other}, "extra": 1}))
    done = install_into(agent, PYTHON, tmp_path / "talk-home", "bob")
    target = agent / "extensions" / "talk"
    assert done == {"extension_dir": str(target), "mcp_config": str(agent / "mcp.json")}
    assert (target / "index.ts").read_text() == (extension_source() / "index.ts").read_text()
    config = json.loads((target / CONFIG_FILE).read_text())
    assert config == {"python": PYTHON, "talk_home": str(tmp_path / "talk-home"), "user": "bob"}
    doc = json.loads((agent / "mcp.json").read_text())
    assert doc["extra"] == 1 and doc["mcpServers"]["fs"] == other
    assert doc["mcpServers"]["talk"]["args"] == ["-I", "-m", "talk", "mcp", "--host", "pi"]
    assert doc["mcpServers"]["talk"]["env"] == {"TALK_HOME": str(tmp_path / "talk-home"), "TALK_USER": "bob"}
    install_into(agent, PYTHON, tmp_path / "talk-home", "bob")  # again: the same files
    assert json.loads((agent / "mcp.json").read_text()) == doc


def test_uninstall_removes_only_talk_s_and_says_what_it_found(tmp_path: Path) -> None:
    agent = tmp_path / "agent"
    install_into(agent, PYTHON, tmp_path / "talk-home", None)
    doc = json.loads((agent / "mcp.json").read_text())
    doc["mcpServers"]["fs"] = {"command": "fs-server"}
    (agent / "mcp.json").write_text(json.dumps(doc))
    done = uninstall_from(agent)
    assert done["removed_extension"] and done["removed_server"]
    assert not (agent / "extensions" / "talk").exists()
    assert json.loads((agent / "mcp.json").read_text()) == {"mcpServers": {"fs": {"command": "fs-server"}}}
    again = uninstall_from(agent)
    assert not again["removed_extension"] and not again["removed_server"]


def test_a_server_named_talk_that_is_not_talk_s_is_left_alone() -> None:
    theirs = {"mcpServers": {"talk": {"command": "someone-elses-talk"}}}
    with pytest.raises(UserError, match="not talk's"):
        merged(theirs, server_entry(PYTHON, Path("/h"), None))
    assert merged(theirs, None) == theirs


def test_a_broken_mcp_json_stops_the_install_with_what_to_do(tmp_path: Path) -> None:
    agent = tmp_path / "agent"
    agent.mkdir()
    (agent / "mcp.json").write_text("{not json")
    with pytest.raises(UserError, match="fix it"):
        install_into(agent, PYTHON, tmp_path / "talk-home", None)
