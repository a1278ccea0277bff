"""`talk install claude`: put talk's Claude Code plugin where Claude Code can load it.

The plugin (a monitor that starts a turn per peer message, and hooks as backstop) ships inside
the `alarms` package; its monitor launcher is the Claude Code adapter, alarms/claude_monitor.sh.
Installing copies both to a folder of its own and writes `talk.env` there: the interpreter talk
runs on, so the plugin never runs `python3` from PATH (a pyenv shim costs ~100 ms on every
agent turn), and the TALK_HOME (and TALK_USER) to read mail from. The folder is also a
one-plugin marketplace, so `/plugin marketplace add DIR` works as well as `claude --plugin-dir DIR`.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from durable.errors import UserError
from talk.options import Json, User
from talk.output import result, warn

PLUGIN_NAME = "talk"
FOLDER_NAME = "claude-plugin"
ENV_FILE = "talk.env"
MONITOR = "scripts/claude_monitor.sh"
EXECUTABLES = (MONITOR, "scripts/claude_hook.sh")


def plugin_source() -> Path:
    """The plugin as shipped in the `alarms` package."""
    return monitor_source().parent / "claude_plugin"


def monitor_source() -> Path:
    """The Claude Code adapter, alarms/claude_monitor.sh: the plugin's monitor launcher."""
    import alarms

    return Path(alarms.__file__).resolve().parent / "claude_monitor.sh"


def env_text(python: str, home: Path, user: str | None) -> str:
    """talk.env: KEY=VALUE lines the launchers read (never source) before starting Python."""
    for value in (python, str(home), user or ""):
        if "\n" in value or "\r" in value:
            raise UserError(f"cannot record {value!r} in {ENV_FILE}: it holds a line break; "
                            "use a path and a name without one")
    lines = [f"TALK_PYTHON={python}", f"TALK_HOME={home}"] + ([f"TALK_USER={user}"] if user else [])
    return "\n".join(lines) + "\n"


def marketplace(description: str) -> dict[str, Any]:
    """A marketplace listing just this folder's plugin, so Claude Code can install it by path."""
    return {"name": "talk-local", "owner": {"name": "talk"},
            "description": "talk's Claude Code plugin, as installed by `talk install claude`.",
            "plugins": [{"name": PLUGIN_NAME, "source": "./", "description": description}]}


def install(target: Path, python: str, home: Path, user: str | None) -> Path:
    """Copy the plugin to `target` (replacing talk's files there) and record the interpreter."""
    source = plugin_source()
    if not ((source / ".claude-plugin" / "plugin.json").is_file() and monitor_source().is_file()):
        raise UserError(f"talk's Claude Code plugin is missing from {source.parent}; reinstall talk "
                        "(pip install --force-reinstall talk-mailbox)")
    if target.resolve() == source:
        raise UserError(f"{target} is the plugin shipped with talk; choose another --dir")
    target.mkdir(parents=True, exist_ok=True)
    shutil.copytree(source, target, dirs_exist_ok=True,
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    # The plugin folder holds a copy of the launcher for installs from the repository's
    # marketplace; what talk installs is the adapter itself.
    shutil.copyfile(monitor_source(), target / MONITOR)
    for name in EXECUTABLES:
        (target / name).chmod(0o755)
    (target / ENV_FILE).write_text(env_text(python, home, user))
    manifest = json.loads((source / ".claude-plugin" / "plugin.json").read_text())
    (target / ".claude-plugin" / "marketplace.json").write_text(
        json.dumps(marketplace(str(manifest.get("description", ""))), indent=2) + "\n")
    return target


def how_to_enable(target: Path) -> str:
    return (f"installed talk's Claude Code plugin in {target}\n"
            f"load it for one session:   claude --plugin-dir {target}\n"
            f"or install it for good:    /plugin marketplace add {target}  then  "
            f"/plugin install {PLUGIN_NAME}@talk-local\n"
            "each peer message then starts a turn in the session (the follower must run: "
            "talk follow --peer NAME)")


def install_claude_command(
    plugin_dir: Annotated[
        Path | None,
        typer.Option("--dir", help="Where to put the plugin (default: TALK_HOME/claude-plugin)."),
    ] = None,
    user: User = None,
    as_json: Json = False,
) -> None:
    """Install the Claude Code plugin: peer mail starts a turn in each Claude Code session."""
    from keys import keystore

    home = keystore.talk_home().expanduser().resolve()
    target = (plugin_dir or home / FOLDER_NAME).expanduser().resolve()
    if not keystore.list_identities(home):
        warn(f"no identity in {home} yet: create one with `talk init NAME` before mail can arrive")
    install(target, sys.executable, home, user)
    result({"plugin_dir": str(target)}, how_to_enable(target), as_json)


if __name__ == "__main__":
    typer.run(install_claude_command)
