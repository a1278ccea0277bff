"""`talk setup` through the real CLI, in a private HOME where all seven real host programs are on
PATH (tests/hosts) and two hosts already hold the user's own config: setup wires every host as
`talk install HOST` does, starts the follower, and says what is left; a second setup changes no
byte; `talk setup --undo` leaves every host config file as it was, byte for byte, and absent where
it was absent."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Agent
from tests.e2e.host_homes import private_home
from tests.hosts.procs import reap_home

HOSTS = ("claude", "codex", "copilot", "gemini", "opencode", "pi", "qwen")
# The user's own config, in layouts talk's installs would not write (spacing, key order, comments).
GEMINI_OWN = b'{"theme":"GitHub",   "mcpServers": {"db": {"command": "db-mcp", "args": ["--ro"]}}}'
CODEX_OWN = b'# mine\nmodel = "o3"\n\n[projects."/src"]\ntrust_level = "trusted"\n'
# Codex keeps its own state in its home (databases, logs, skills) whenever a codex program runs,
# as `talk install codex` runs it to record trust; these are its config, the rest is its own.
CODEX_CONFIG = ("hooks.json", "config.toml")


@pytest.fixture
def home(tmp_path: Path, bob: Agent, host_bin: Path) -> Iterator[Path]:
    """bob's private HOME with every host program on PATH, and the user's config in two hosts."""
    path = private_home(tmp_path, bob, TALK_USER="bob")
    bob.extra_env["PATH"] = os.pathsep.join([str(host_bin), bob.extra_env["PATH"]])
    (path / ".gemini").mkdir()
    (path / ".gemini" / "settings.json").write_bytes(GEMINI_OWN)
    (path / ".codex").mkdir()
    (path / ".codex" / "config.toml").write_bytes(CODEX_OWN)
    try:
        yield path
    finally:
        bob.run("stop")
        reap_home(path)


def config_files(home: Path, talk_home: Path) -> dict[str, str]:
    """Every host config file there is, by path: its bytes' hash."""
    codex = [home / ".codex" / name for name in CODEX_CONFIG]
    found = [p for p in home.rglob("*") if p.is_file()
             and (".codex" not in p.relative_to(home).parts or p in codex)]
    found += [p for p in (talk_home / "claude-plugin").rglob("*") if p.is_file()]
    return {str(p): hashlib.sha256(p.read_bytes()).hexdigest() for p in found}


def setup(agent: Agent, *args: str) -> dict[str, Any]:
    r = agent.run("setup", "--json", *args, timeout=180)
    assert r.code == 0 and "Traceback" not in r.err, (r.code, r.err, r.out)
    data: dict[str, Any] = r.json()
    return data


def doctor(agent: Agent) -> dict[str, dict[str, Any]]:
    r = agent.run("doctor", "--json", timeout=60)
    assert "Traceback" not in r.err, r.err
    return {c["name"]: c for c in r.json()}


def test_setup_wires_every_host_changes_nothing_twice_and_undo_leaves_every_file_as_it_was(
        bob: Agent, home: Path) -> None:
    before = config_files(home, bob.home)
    assert set(before) == {str(home / ".gemini" / "settings.json"), str(home / ".codex" / "config.toml")}
    unwired = doctor(bob)["setup"]
    assert unwired["status"] == "warn" and unwired["fix"] == "talk setup", unwired
    assert all(title in unwired["detail"] for title in ("Codex", "Gemini CLI", "Qwen Code", "pi")), unwired

    done = setup(bob)
    rows = {h["host"]: h for h in done["hosts"]}
    assert set(rows) == set(HOSTS) and all(h["installed"] and h["on_path"] for h in rows.values()), rows
    for name in ("codex", "copilot", "gemini", "pi", "qwen"):
        row = rows[name]
        assert (row["state"], row["failure"], row["todo"]) == ("wired", None, None), row
        assert row["sessions"] == [] and row["door"], row
    claude = rows["claude"]  # the plugin is written; enabling it in Claude Code is the user's command
    assert claude["state"] == "incomplete" and "claude plugin install talk@talk-local" in claude["todo"]
    assert (bob.home / "claude-plugin" / ".claude-plugin" / "plugin.json").is_file()
    assert rows["opencode"]["todo"].startswith("talk door opencode --url URL"), rows["opencode"]
    assert done["follower"]["started"] and done["follower"]["running"], done["follower"]
    assert bob.ok("status", "--json").json()["follower"]["pid"] == done["follower"]["pid"]

    checks = doctor(bob)
    assert checks["setup"]["status"] == "ok", checks["setup"]
    for name in ("codex", "copilot", "gemini", "pi", "qwen"):
        assert checks[name]["status"] == "ok" and "not installed" not in checks[name]["detail"], checks[name]
    assert "trusted" in checks["codex"]["detail"]
    gemini = json.loads((home / ".gemini" / "settings.json").read_text())
    assert gemini["theme"] == "GitHub" and set(gemini["mcpServers"]) == {"db", "talk"}
    assert 'model = "o3"' in (home / ".codex" / "config.toml").read_text()

    wired = config_files(home, bob.home)
    again = setup(bob)
    assert config_files(home, bob.home) == wired
    assert again["follower"]["pid"] == done["follower"]["pid"] and not again["follower"]["started"]
    screen = bob.ok("setup").out
    assert screen.startswith("talk setup for bob\nfollower: started by talk setup")
    assert len(screen.splitlines()) < 30  # one screen
    assert "Codex        wired" in screen and "to do: talk door opencode --url URL" in screen

    r = bob.run("setup", "--undo", timeout=180)
    assert r.code == 0 and "Traceback" not in r.err, r.err
    assert "stopped the follower talk setup started" in r.out and "kept" not in r.out, r.out
    assert config_files(home, bob.home) == before
    assert not (bob.home / "claude-plugin").exists()
    for folder in (".qwen", ".copilot", ".pi"):
        assert not (home / folder).exists(), folder
    assert not bob.ok("status", "--json").json()["follower"]["running"]
    assert "nothing to undo" in bob.ok("setup", "--undo").out


def test_a_file_the_user_changed_after_setup_keeps_the_change_and_undo_says_so(bob: Agent,
                                                                              tmp_path: Path) -> None:
    home = private_home(tmp_path, bob, TALK_USER="bob")  # no host program: found by its folder
    settings = home / ".gemini" / "settings.json"
    settings.parent.mkdir()
    settings.write_bytes(GEMINI_OWN)
    try:
        rows = {h["host"]: h for h in setup(bob)["hosts"]}
        assert [n for n, h in rows.items() if h["installed"]] == ["gemini"], rows
        assert rows["gemini"]["state"] == "wired", rows["gemini"]
        doc = json.loads(settings.read_text())
        doc["theme"] = "Dracula"
        settings.write_text(json.dumps(doc))
        r = bob.run("setup", "--undo")
    finally:
        bob.run("stop")
    assert r.code == 0 and f"kept {settings}" in r.out, r.out
    left = json.loads(settings.read_text())
    assert left == {"theme": "Dracula", "mcpServers": {"db": {"command": "db-mcp", "args": ["--ro"]}}}, left


def test_without_an_identity_setup_says_to_make_one(tmp_path: Path, bob: Agent) -> None:
    nobody = Agent(tmp_path / "empty-talk-home", bob.relay_url)
    for args in (("setup",), ("setup", "--undo"), ("setup", "--json")):
        r = nobody.run(*args)
        assert (r.code, r.out) == (1, ""), (args, r)
        assert r.err.count("\n") == 1 and "talk init NAME" in r.err and "Traceback" not in r.err, r.err


def test_a_follower_that_cannot_start_alone_is_named_with_its_command(alice: Agent, tmp_path: Path) -> None:
    private_home(tmp_path, alice)  # no host at all
    alice.passphrase_file = None  # protected keys, and no file to read the passphrase from
    data = setup(alice)
    follower = data["follower"]
    assert not follower["running"] and "cannot ask for the passphrase" in follower["said"], follower
    assert follower["todo"] == "talk follow --passphrase-file PATH"
    assert not any(h["installed"] for h in data["hosts"])
    assert "no agent host found" in alice.ok("setup").out
    assert "nothing to undo" not in alice.ok("setup", "--undo").out
