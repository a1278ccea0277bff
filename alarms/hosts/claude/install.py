"""`talk install claude` / `talk uninstall claude`: talk's Claude Code plugin, where Claude Code can
load it.

The plugin (a monitor door that writes each peer message to the session's inbox socket, and hook
doors that hand on what it has not) ships in `alarms/hosts/claude/plugin/`; its monitor launcher is
alarms/claude_monitor.sh.
Installing copies both to a folder of its own and writes `talk.env` there: the interpreter talk
runs on, so the plugin never runs `python3` from PATH (a pyenv shim costs ~100 ms on every
agent turn), and the TALK_HOME (and TALK_USER) to read mail from. The folder is also a
one-plugin marketplace, so `/plugin marketplace add DIR` works as well as `claude --plugin-dir DIR`.
Uninstalling removes that folder (only one that holds talk's plugin); what Claude Code itself
recorded when the user added the plugin is Claude Code's, so the output names the command for it.

`wiring` reads Claude Code's own config for `talk doctor` and `talk status`: whether a talk plugin
is enabled (settings.json `enabledPlugins`), and, for one installed from a folder (a "directory"
marketplace, which Claude Code reads in place rather than from its cache), whether that folder
and the interpreter its talk.env names are still there.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from alarms.door import Done, Request
from alarms.host_config import read_config
from alarms.host_files import copy_tree, tighten, tree, write_file
from alarms.hosts.claude import NAME as HOST
from alarms.wiring import State, Wiring, guarded, missing_program
from durable.errors import UserError
from durable.home import identity_names, talk_home

PLUGIN_NAME = "talk"
FOLDER_NAME = "claude-plugin"
ENV_FILE = "talk.env"
MONITOR = "scripts/claude_monitor.sh"
EXECUTABLES = (MONITOR, "scripts/claude_hook.sh")
MARKETPLACE = "talk-local"
AGAIN = "talk install claude"


def plugin_source() -> Path:
    """The plugin as shipped in the `alarms` package."""
    return Path(__file__).resolve().parent / "plugin"


def monitor_source() -> Path:
    """alarms/claude_monitor.sh, where the design card names the monitor: it runs the plugin's
    own launcher (`MONITOR`), the one source, which a marketplace install gets with the folder."""
    return Path(__file__).resolve().parents[2] / "claude_monitor.sh"


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
    return {"name": MARKETPLACE, "owner": {"name": "talk"},
            "description": "talk's Claude Code plugin, as installed by `talk install claude`.",
            "plugins": [{"name": PLUGIN_NAME, "source": "./", "description": description}]}


def copy_plugin(target: Path, python: str, home: Path, user: str | None) -> Path:
    """Copy the plugin to `target` (replacing talk's files there) and record the interpreter."""
    source = plugin_source()
    if not ((source / ".claude-plugin" / "plugin.json").is_file() and (source / MONITOR).is_file()):
        raise UserError(f"talk's Claude Code plugin is missing from {source.parent}; reinstall talk "
                        "(pip install --force-reinstall talk-mailbox)")
    if target.resolve() == source:
        raise UserError(f"{target} is the plugin shipped with talk; choose another --dir")
    copy_tree(source, target, skip=lambda p: p.name == "__pycache__" or p.suffix == ".pyc",
              executable=lambda rel: str(rel) in EXECUTABLES)
    write_file(target / ENV_FILE, env_text(python, home, user).encode())
    manifest = json.loads((source / ".claude-plugin" / "plugin.json").read_text())
    write_file(target / ".claude-plugin" / "marketplace.json",
               (json.dumps(marketplace(str(manifest.get("description", ""))), indent=2) + "\n").encode())
    tighten(paths(target))
    return target


def paths(plugin: Path | None = None) -> list[Path]:
    """What the install writes, for `talk doctor`: the plugin folder, all of it talk's."""
    return tree(plugin or default_plugin_dir())


def how_to_enable(target: Path) -> str:
    return (f"installed talk's Claude Code plugin in {target}\n"
            f"load it for one session:   claude --plugin-dir {target}\n"
            f"or install it for good:    /plugin marketplace add {target}  then  "
            f"/plugin install {PLUGIN_NAME}@{MARKETPLACE}\n"
            "each peer message then starts a turn in the session (the follower must run: "
            "talk follow --peer NAME)")


def home_of(env: Any) -> Path:
    return Path(talk_home(env)).expanduser().resolve()


def install(request: Request) -> Done:
    """Copy the plugin to --dir (default TALK_HOME/claude-plugin) and record the interpreter."""
    home = home_of(request.env)
    target = (request.where or home / FOLDER_NAME).expanduser().resolve()
    warnings = () if identity_names(str(home)) else (
        f"no identity in {home} yet: create one with `talk init NAME` before mail can arrive",)
    copy_plugin(target, request.python, home, request.user)
    return Done({"plugin_dir": str(target)}, how_to_enable(target), warnings)


def is_our_plugin(folder: Path) -> bool:
    """A folder `install` made: talk's manifest and its talk.env."""
    try:
        manifest = json.loads((folder / ".claude-plugin" / "plugin.json").read_text())
    except (OSError, ValueError):
        return False
    named = isinstance(manifest, dict) and manifest.get("name") == PLUGIN_NAME
    return named and (folder / ENV_FILE).is_file()


def uninstall(request: Request) -> Done:
    """Remove the plugin folder `install` made; Claude Code's own record of it is the user's."""
    target = (request.where or home_of(request.env) / FOLDER_NAME).expanduser().resolve()
    if target == plugin_source():
        raise UserError(f"{target} is the plugin shipped with talk; choose another --dir")
    removed = target.is_dir() and is_our_plugin(target)
    if removed:
        shutil.rmtree(target)
    said = (f"removed talk's Claude Code plugin from {target}; if you installed it in Claude Code, also "
            f"run: claude plugin uninstall {PLUGIN_NAME}@{MARKETPLACE}" if removed
            else f"no talk plugin in {target}")
    return Done({"plugin_dir": str(target), "removed": removed}, said)


def env_values(text: str) -> dict[str, str]:
    """talk.env's KEY=VALUE lines, read as the launchers read them."""
    return dict(line.split("=", 1) for line in text.splitlines() if "=" in line)


def loaded_from(config: Path, settings: dict[str, Any], key: str) -> Path | None:
    """The folder Claude Code loads plugin `key` (name@marketplace) from, when its marketplace is a
    folder; None for any other marketplace."""
    name = key.partition("@")[2]
    extra = settings.get("extraKnownMarketplaces")
    known = read_config(config / "plugins" / "known_marketplaces.json", AGAIN)
    for listing in (extra if isinstance(extra, dict) else {}, known):
        source = (listing.get(name) or {}).get("source") if isinstance(listing.get(name), dict) else None
        if isinstance(source, dict) and source.get("source") == "directory" and source.get("path"):
            return Path(str(source["path"]))
    return None


def claude_config(env: dict[str, str]) -> Path:
    from alarms.hosts.claude.session import config_dir

    return Path(config_dir(env)).expanduser()


def default_plugin_dir() -> Path:
    import os

    return home_of(os.environ) / FOLDER_NAME


def wiring(config: Path | None = None, plugin: Path | None = None) -> Wiring:
    """Is talk's plugin installed and enabled in Claude Code, and can it run? Reads only."""
    import os

    config = config or claude_config(dict(os.environ))
    plugin = plugin or default_plugin_dir()
    if not config.is_dir() and not plugin.is_dir():
        return Wiring(HOST, State.ABSENT, f"not installed (no {config})")
    return guarded(HOST, AGAIN, config / "settings.json", lambda: _judge(config, plugin))


def _reinstall(folder: Path) -> str:
    return AGAIN if folder.resolve() == default_plugin_dir() else f"{AGAIN} --dir {folder}"


def _judge(config: Path, plugin: Path) -> Wiring:
    settings = read_config(config / "settings.json", AGAIN)
    enabled = settings.get("enabledPlugins")
    ours = {k: v for k, v in (enabled if isinstance(enabled, dict) else {}).items()
            if k.partition("@")[0] == PLUGIN_NAME}
    if not ours and plugin.is_dir():
        return Wiring(HOST, State.INCOMPLETE,
                      f"talk's plugin is in {plugin} but not installed in Claude Code: only sessions "
                      f"started with --plugin-dir {plugin} load it",
                      f"claude plugin marketplace add {plugin} && "
                      f"claude plugin install {PLUGIN_NAME}@{MARKETPLACE}")
    if not ours:
        return Wiring(HOST, State.UNWIRED, f"talk's plugin is not installed ({config / 'settings.json'} "
                      "enables none)")
    key = next(iter(ours))
    if not any(v is True for v in ours.values()):
        return Wiring(HOST, State.INCOMPLETE, f"talk's plugin {key} is disabled in Claude Code",
                      f"claude plugin enable {key}")
    folder = loaded_from(config, settings, key)
    if folder is None:
        return Wiring(HOST, State.WIRED, f"plugin {key} enabled")
    if not (folder / ".claude-plugin" / "plugin.json").is_file():
        return Wiring(HOST, State.STALE, f"Claude Code loads talk's plugin from {folder}, which is gone",
                      _reinstall(folder))
    env = folder / ENV_FILE
    python = env_values(env.read_text()).get("TALK_PYTHON") if env.is_file() else None
    gone = missing_program([python]) if python else None
    if gone:
        return Wiring(HOST, State.STALE, f"talk's plugin in {folder} runs {gone}, which is gone",
                      _reinstall(folder))
    return Wiring(HOST, State.WIRED, f"plugin {key} enabled, loaded from {folder}")


def session_door(plugin: Wiring) -> str:
    """What wakes a Claude Code session, for `talk status`, from the plugin's wiring."""
    if plugin.state is State.WIRED:
        return ("Claude Code plugin: its monitor writes each message to the session's inbox socket; "
                "hooks at prompt, after tool calls and at stop as backstop")
    return ("hooks at prompt, after tool calls and at stop (talk's plugin is not installed in Claude Code: "
            "an idle session is not woken unless started with --plugin-dir)")
