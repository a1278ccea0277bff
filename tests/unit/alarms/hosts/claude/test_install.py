"""What `talk doctor` and `talk status` read from Claude Code's config about talk's plugin: enabled
or not, the folder a directory marketplace loads it from, and what then wakes a session."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from alarms.hosts.claude.install import env_values, loaded_from, session_door, wiring
from alarms.wiring import State, Wiring


def test_env_values_reads_key_value_lines() -> None:
    found = env_values("TALK_PYTHON=/p/python\nTALK_HOME=/h=x\n\n")
    assert found == {"TALK_PYTHON": "/p/python", "TALK_HOME": "/h=x"}


def test_loaded_from_finds_a_directory_marketplace_in_settings_or_the_known_list(tmp_path: Path) -> None:
    source = {"source": {"source": "directory", "path": "/plug"}}
    assert loaded_from(tmp_path, {"extraKnownMarketplaces": {"m": source}}, "talk@m") == Path("/plug")
    assert loaded_from(tmp_path, {}, "talk@m") is None
    (tmp_path / "plugins").mkdir()
    (tmp_path / "plugins" / "known_marketplaces.json").write_text(json.dumps({"m": source}))
    assert loaded_from(tmp_path, {}, "talk@m") == Path("/plug")
    github = {"m": {"source": {"source": "github", "repo": "o/r"}}}
    assert loaded_from(tmp_path, {"extraKnownMarketplaces": github}, "talk@m") == Path("/plug")


def plugin_folder(tmp_path: Path, python: str) -> Path:
    plugin = tmp_path / "plugin"
    (plugin / ".claude-plugin").mkdir(parents=True, exist_ok=True)
    (plugin / ".claude-plugin" / "plugin.json").write_text("{}")
    (plugin / "talk.env").write_text(f"TALK_PYTHON={python}\n")
    return plugin


def settings(config: Path, plugin: Path, enabled: object) -> None:
    config.mkdir(exist_ok=True)
    (config / "settings.json").write_text(json.dumps({
        "extraKnownMarketplaces": {"talk-local": {"source": {"source": "directory", "path": str(plugin)}}},
        "enabledPlugins": {"talk@talk-local": enabled, "other@x": True}}))


def test_wiring_from_absent_to_enabled_to_stale(tmp_path: Path) -> None:
    config = tmp_path / "claude"
    plugin = tmp_path / "plugin"
    assert wiring(config, plugin).state is State.ABSENT
    config.mkdir()
    assert wiring(config, plugin).state is State.UNWIRED
    plugin_folder(tmp_path, sys.executable)
    assert wiring(config, plugin).state is State.INCOMPLETE
    settings(config, plugin, False)
    assert wiring(config, plugin).fix == "claude plugin enable talk@talk-local"
    settings(config, plugin, True)
    assert wiring(config, plugin).state is State.WIRED
    plugin_folder(tmp_path, "/gone/python")
    stale = wiring(config, plugin)
    assert stale.state is State.STALE and stale.fix == f"talk install claude --dir {plugin}"


def test_session_door_says_the_monitor_only_when_the_plugin_is_wired() -> None:
    assert "monitor" in session_door(Wiring("claude", State.WIRED, ""))
    for state in (State.ABSENT, State.UNWIRED, State.INCOMPLETE, State.STALE):
        said = session_door(Wiring("claude", state, ""))
        assert "monitor" not in said and "not installed in Claude Code" in said
