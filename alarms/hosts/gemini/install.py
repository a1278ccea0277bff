"""`talk install gemini` / `talk uninstall gemini`: talk's hooks and MCP server in Gemini CLI's settings.json.

The hook door (alarms/gemini_hook.py, which runs `alarms.hosts.gemini.hook`) runs for SessionStart,
BeforeAgent, AfterTool (no matcher: after every tool call, so mail reaches a busy turn) and
AfterAgent. As for Codex, the command
names the interpreter by its absolute path with `-I -S`, and bakes in TALK_HOME and TALK_USER
given at install time (Gemini CLI passes hooks a filtered environment). The MCP server entry
`mcpServers.talk` runs `talk mcp --host gemini`, for the agent's own send, inbox and status.

settings.json is merged, never overwritten: other hooks, servers and settings stay as they are;
a talk handler found there is replaced in place; running it twice changes nothing. Uninstall
removes exactly talk's handlers (and groups and events they leave empty) and its MCP entry.
Gemini CLI runs user-level hooks without a trust step; project-level ones
(`.gemini/settings.json`, with --settings) only in a trusted folder. `wiring` reads the same file
back for `talk doctor`.
"""

from __future__ import annotations

import copy
import os
import shutil
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from alarms.door import Done, Request
from alarms.host_config import edit_config, handlers_in, hook_command, identity_warning, place, read_config
from alarms.host_files import tighten
from alarms.hosts.gemini import NAME as HOST
from alarms.wiring import State, Wiring, guarded, judge_hooks, with_mcp_server
from durable.errors import UserError

EVENTS = ("SessionStart", "BeforeAgent", "AfterTool", "AfterAgent")
HOOK_TIMEOUT_MS = 10_000  # Gemini CLI counts hook timeouts in milliseconds
HOOK_NAME = "talk"
SCRIPT_MARK = "gemini_hook.py"
MCP_NAME = "talk"
AGAIN = "talk install gemini"


def hook_script() -> Path:
    return Path(__file__).resolve().parents[2] / "gemini_hook.py"


def settings_path(env: Mapping[str, str]) -> Path:
    """Gemini CLI's user settings: `$GEMINI_CLI_HOME/.gemini/settings.json`, HOME by default."""
    home = env.get("GEMINI_CLI_HOME") or env.get("HOME") or str(Path.home())
    return Path(home).expanduser() / ".gemini" / "settings.json"


def is_talk_handler(handler: Any) -> bool:
    return isinstance(handler, dict) and SCRIPT_MARK in str(handler.get("command", ""))


def handler_for(command: str) -> dict[str, Any]:
    return {"type": "command", "name": HOOK_NAME, "command": command, "timeout": HOOK_TIMEOUT_MS,
            "description": "Hand on talk mail from other agents"}


def mcp_entry(talk: str, talk_home: str | None, user: str | None) -> dict[str, Any]:
    args = ["mcp", "--host", "gemini", *(["--user", user] if user else [])]
    entry: dict[str, Any] = {"command": talk, "args": args, "description": "talk: mail between agents"}
    if talk_home:
        entry["env"] = {"TALK_HOME": talk_home}
    return entry


def _event_groups(doc: dict[str, Any], event: str, create: bool) -> list[Any] | None:
    hooks = doc.setdefault("hooks", {}) if create else doc.get("hooks")
    if hooks is None:
        return None
    if not isinstance(hooks, dict):
        raise ValueError('"hooks" is not an object')
    groups = hooks.setdefault(event, []) if create else hooks.get(event)
    if groups is None:
        return None
    if not isinstance(groups, list) or not all(isinstance(g, dict) for g in groups):
        raise ValueError(f'"hooks.{event}" is not a list of objects')
    return groups


def _servers(doc: dict[str, Any], create: bool) -> dict[str, Any] | None:
    servers = doc.setdefault("mcpServers", {}) if create else doc.get("mcpServers")
    if servers is not None and not isinstance(servers, dict):
        raise ValueError('"mcpServers" is not an object')
    return servers


def merge_settings(doc: dict[str, Any], command: str, mcp: dict[str, Any]) -> dict[str, Any]:
    """`doc` (a settings.json) with talk's handler for each event and its MCP server;
    ValueError on a shape Gemini CLI would refuse."""
    merged = copy.deepcopy(doc)
    for event in EVENTS:
        groups = _event_groups(merged, event, create=True)
        assert groups is not None
        place(groups, handler_for(command), is_talk_handler)
    servers = _servers(merged, create=True)
    assert servers is not None
    servers[MCP_NAME] = mcp
    return merged


def is_talk_server(entry: Any) -> bool:
    return isinstance(entry, dict) and entry.get("args", [None])[:1] == ["mcp"]


def remove_settings(doc: dict[str, Any]) -> dict[str, Any]:
    """`doc` without talk's handlers (and the groups and events they leave empty) and MCP entry."""
    cleaned = copy.deepcopy(doc)
    hooks = cleaned.get("hooks")
    for event in EVENTS:
        groups = _event_groups(cleaned, event, create=False)
        if groups is None:
            continue
        place(groups, None, is_talk_handler)
        if not groups and isinstance(hooks, dict):
            del hooks[event]
    if hooks == {} and doc.get("hooks"):
        del cleaned["hooks"]
    servers = _servers(cleaned, create=False)
    if servers is not None and is_talk_server(servers.get(MCP_NAME)):
        del servers[MCP_NAME]
        if not servers:
            del cleaned["mcpServers"]
    return cleaned


def removed_from(doc: dict[str, Any]) -> dict[str, Any] | None:
    """`remove_settings`, and None (the file goes) when nothing else is left in it."""
    return remove_settings(doc) or None


def talk_program() -> str:
    """The `talk` to start as the MCP server: the one beside this interpreter, else on PATH."""
    beside = Path(sys.executable).parent / "talk"
    if beside.exists():
        return str(beside)
    found = shutil.which("talk")
    if found is None:
        raise UserError("no `talk` program beside this Python or on PATH, for Gemini CLI to start as "
                        "its MCP server; install talk with pip (or pipx) and run this again")
    return found


def settings_of(request: Request) -> Path:
    return (request.where or settings_path(request.env)).expanduser().resolve()


def install(request: Request) -> Done:
    """Put talk's hooks and MCP server into Gemini CLI's settings.json (--settings, else the user's)."""
    path = settings_of(request)
    command = hook_command(request.python, hook_script(), request.talk_home, request.who)
    mcp = mcp_entry(talk_program(), request.talk_home, request.who)
    changed = edit_config(path, lambda doc: merge_settings(doc, command, mcp), AGAIN)
    tighten(paths(path))
    warning = identity_warning(request.env, request.who)
    return Done({"settings_file": str(path), "command": command, "events": list(EVENTS),
                 "mcp_server": MCP_NAME, "changed": changed},
                f"installed talk's hooks ({', '.join(EVENTS)}) and MCP server in {path}",
                (warning,) if warning else ())


def uninstall(request: Request) -> Done:
    """Remove talk's Gemini CLI hooks and MCP server, leaving the rest of settings.json as it was."""
    path = settings_of(request)
    changed = path.exists() and edit_config(path, removed_from, AGAIN)
    return Done({"settings_file": str(path), "changed": changed},
                f"removed talk from {path}" if changed else f"talk was not installed in {path}")


def paths(given: Path | None = None) -> list[Path]:
    """What the install writes, for `talk doctor`: Gemini CLI's settings and their folder."""
    settings = (given or settings_path(dict(os.environ))).expanduser().resolve()
    return [settings.parent, settings]


def wiring(given: Path | None = None) -> Wiring:
    """Are talk's hooks and MCP server in Gemini CLI's settings.json, complete and runnable? Reads only."""
    settings = (given or settings_path(dict(os.environ))).expanduser().resolve()
    if not settings.parent.is_dir():
        return Wiring(HOST, State.ABSENT, f"not installed (no {settings.parent})")
    return guarded(HOST, AGAIN, settings, lambda: _judge(settings))


def _judge(settings: Path) -> Wiring:
    doc = read_config(settings, AGAIN)
    found = {e: [str(h.get("command")) for h in handlers_in(_event_groups(doc, e, create=False),
                                                             is_talk_handler)] for e in EVENTS}
    entry = (_servers(doc, create=False) or {}).get(MCP_NAME)
    hooks = judge_hooks(HOST, found, EVENTS, AGAIN, settings)
    return with_mcp_server(hooks, entry if is_talk_server(entry) else None, settings, AGAIN)
