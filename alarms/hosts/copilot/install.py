"""`talk install copilot` / `talk uninstall copilot`: talk's hooks and MCP server in GitHub
Copilot CLI's own config.

The hooks go into `hooks/talk.json` under Copilot's home (COPILOT_HOME, else ~/.copilot), which
Copilot CLI loads for every session of the user: `alarms.hosts.copilot.hook` for sessionStart,
userPromptSubmitted, postToolUse and agentStop, run by the interpreter that runs talk, by its
absolute path and with `-I` (no PYTHONPATH, no cwd on sys.path). The MCP server (`talk mcp
--host copilot`) goes into `mcp-config.json` as `mcpServers.talk`. talk's extension
(alarms/hosts/copilot/extension) goes into `extensions/talk/`, with `talk.json` beside it naming
the same interpreter and identity: it opens talk's door (`ext_door`) in every session, from the
first second, once Copilot's extensions are on (`enabledFeatureFlags.EXTENSIONS` in Copilot's
settings.json, or --experimental: a preview feature of Copilot CLI 1.0.102 that talk leaves to the
user to turn on).

Both files are merged, never overwritten: other hooks and servers stay as they are; talk's own
entries are found by what they run and replaced in place, so running the command twice changes
nothing. Uninstalling takes out talk's entries only, and a file left holding nothing of anyone
else's is removed, and the extension's folder goes. `wiring` reads all three back for `talk doctor`.
"""

from __future__ import annotations

import contextlib
import copy
import json
import os
import shutil
from pathlib import Path
from typing import Any

from alarms.door import Done, Request
from alarms.host_config import edit_config, identity_warning, read_config, with_server
from alarms.host_files import copy_file, tighten, tree, write_file
from alarms.hosts.copilot import NAME as HOST
from alarms.wiring import State, Wiring, guarded, judge_hooks, with_mcp_server

EVENTS = ("sessionStart", "userPromptSubmitted", "postToolUse", "agentStop")
HOOK_MODULE = "alarms.hosts.copilot.hook"
OLD_HOOK_MODULE = "alarms.copilot_hook"  # what installs before the move to alarms/hosts/copilot/ wrote
HOOKS_NAME = "talk.json"
MCP_NAME = "mcp-config.json"
SERVER = "talk"
AGAIN = "talk install copilot"
HOOK_TIMEOUT_S = 10
HOME_ENV = "COPILOT_HOME"
EXTENSION = "extension.mjs"
EXTENSION_CONFIG = "talk.json"


def copilot_home(given: Path | None, env: Any = os.environ) -> Path:
    return (given or Path(env.get(HOME_ENV) or Path.home() / ".copilot")).expanduser().resolve()


def hook_argv(python: str, event: str, talk_home: str | None, user: str | None) -> list[str]:
    """TALK_HOME and TALK_USER given at install time are baked in, so the hook finds the
    identity however Copilot is started."""
    args = [python, "-I", "-m", HOOK_MODULE, event]
    args += ["--talk-home", talk_home] if talk_home else []
    return args + (["--user", user] if user else [])


def handler_for(argv: list[str]) -> dict[str, Any]:
    import shlex

    return {"type": "command", "bash": shlex.join(argv), "timeoutSec": HOOK_TIMEOUT_S}


def is_talk_handler(handler: Any) -> bool:
    bash = str(handler.get("bash", "")) if isinstance(handler, dict) else ""
    return HOOK_MODULE in bash or OLD_HOOK_MODULE in bash


def _hooks_of(doc: dict[str, Any]) -> dict[str, Any]:
    if doc.get("version", 1) != 1:
        raise ValueError(f'"version" is {doc.get("version")!r}, not 1')
    hooks = doc.setdefault("hooks", {})
    if not isinstance(hooks, dict) or not all(isinstance(v, list) for v in hooks.values()):
        raise ValueError('"hooks" is not an object of lists')
    return hooks


def merge_hooks(doc: dict[str, Any], handlers: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """`doc` with talk's handler for each event where the first talk handler was (others go),
    else at the end; ValueError on a shape Copilot would refuse."""
    merged = copy.deepcopy(doc)
    merged.setdefault("version", 1)
    hooks = _hooks_of(merged)
    for event, new in handlers.items():
        kept, placed = [], False
        for h in hooks.setdefault(event, []):
            if not is_talk_handler(h):
                kept.append(h)
            elif not placed:
                kept.append(new)
                placed = True
        hooks[event] = kept if placed else [*kept, new]
    return merged


def unmerge_hooks(doc: dict[str, Any]) -> dict[str, Any] | None:
    """`doc` without talk's handlers; None when nothing of anyone else's is left."""
    left = copy.deepcopy(doc)
    hooks = _hooks_of(left)
    for event in list(hooks):
        hooks[event] = [h for h in hooks[event] if not is_talk_handler(h)]
        if not hooks[event]:
            del hooks[event]
    return left if hooks or set(left) - {"version", "hooks"} else None


def extension_source() -> Path:
    """The extension as shipped in the `alarms` package."""
    return Path(__file__).resolve().parent / "extension" / EXTENSION


def extension_dir(home: Path) -> Path:
    return home / "extensions" / SERVER


def extension_config(python: str, talk_home: str | None, user: str | None) -> dict[str, str]:
    config = {"python": python, **({"talk_home": talk_home} if talk_home else {})}
    return {**config, **({"user": user} if user else {})}


def install_extension(home: Path, config: dict[str, str]) -> Path:
    target = extension_dir(home)
    copy_file(extension_source(), target / EXTENSION)
    write_file(target / EXTENSION_CONFIG, (json.dumps(config, indent=2) + "\n").encode())
    return target


def server_entry(python: str, talk_home: str | None, user: str | None) -> dict[str, Any]:
    env = {"TALK_HOME": talk_home} if talk_home else {}
    env.update({"TALK_USER": user} if user else {})
    return {"type": "local", "command": python, "args": ["-m", "talk", "mcp", "--host", "copilot"],
            "env": env, "tools": ["*"]}


def merge_servers(doc: dict[str, Any], entry: dict[str, Any]) -> dict[str, Any]:
    return with_server(doc, SERVER, entry)


def unmerge_servers(doc: dict[str, Any]) -> dict[str, Any] | None:
    """`doc` without talk's server; None when nothing is left (the file goes)."""
    return with_server(doc, SERVER, None) or None


def install(request: Request) -> Done:
    """Put talk's hooks and MCP server into Copilot CLI's config (--copilot-home, else the user's)."""
    home = copilot_home(request.where, request.env)
    talk_home, user = request.talk_home, request.who
    handlers = {e: handler_for(hook_argv(request.python, e, talk_home, user)) for e in EVENTS}
    hooks_file, mcp_file = home / "hooks" / HOOKS_NAME, home / MCP_NAME
    edit_config(hooks_file, lambda doc: merge_hooks(doc, handlers), AGAIN)
    entry = server_entry(request.python, talk_home, user)
    edit_config(mcp_file, lambda doc: merge_servers(doc, entry), AGAIN)
    extension = install_extension(home, extension_config(request.python, talk_home, user))
    tighten(paths(home))
    warning = identity_warning(request.env, user)
    return Done({"hooks_file": str(hooks_file), "mcp_file": str(mcp_file), "events": list(EVENTS),
                 "extension_dir": str(extension)},
                f"installed talk's hooks in {hooks_file}, its MCP server in {mcp_file} and its extension "
                f"in {extension}\nthe extension wakes an idle session once Copilot's extensions are on: "
                '"enabledFeatureFlags": {"EXTENSIONS": true} in settings.json, or copilot --experimental',
                (warning,) if warning else ())


def uninstall(request: Request) -> Done:
    """Take talk's hooks and MCP server out of Copilot CLI's config, leaving the rest as it was."""
    home = copilot_home(request.where, request.env)
    hooks_file, mcp_file = home / "hooks" / HOOKS_NAME, home / MCP_NAME
    changed = [str(p) for p, change in ((hooks_file, unmerge_hooks), (mcp_file, unmerge_servers))
               if p.exists() and edit_config(p, change, AGAIN)]
    extension = extension_dir(home)
    if extension.is_dir():
        shutil.rmtree(extension)
        changed.append(str(extension))
        with contextlib.suppress(OSError):  # the folder install made, when nothing else is in it
            extension.parent.rmdir()
    said = "removed talk from " + ", ".join(changed) if changed else "talk was not installed for Copilot CLI"
    return Done({"changed": changed}, said)


def paths(given: Path | None = None) -> list[Path]:
    """What the install writes, for `talk doctor`: Copilot's home, its hooks folder, both files,
    and the extension (Copilot runs every extension in its extensions folder)."""
    home = copilot_home(given)
    return [home, home / "hooks", home / "hooks" / HOOKS_NAME, home / MCP_NAME, home / "extensions",
            *tree(extension_dir(home))]


def wiring(given: Path | None = None) -> Wiring:
    """Are talk's hooks and MCP server in Copilot CLI's config, complete and runnable? Reads only."""
    home = copilot_home(given)
    if not home.is_dir():
        return Wiring(HOST, State.ABSENT, f"not installed (no {home})")
    hooks_file = home / "hooks" / HOOKS_NAME
    return guarded(HOST, AGAIN, hooks_file, lambda: _judge(hooks_file, home / MCP_NAME, extension_dir(home)))


def _judge(hooks_file: Path, mcp_file: Path, extension: Path) -> Wiring:
    hooks = _hooks_of(read_config(hooks_file, AGAIN))
    found = {e: [str(h.get("bash")) for h in hooks.get(e, []) if is_talk_handler(h)] for e in EVENTS}
    servers = read_config(mcp_file, AGAIN).get("mcpServers")
    entry = servers.get(SERVER) if isinstance(servers, dict) else None
    wired = with_mcp_server(judge_hooks(HOST, found, EVENTS, AGAIN, hooks_file), entry, mcp_file, AGAIN)
    whole = all((extension / name).is_file() for name in (EXTENSION, EXTENSION_CONFIG))
    if wired.state is State.WIRED and not whole:
        return Wiring(HOST, State.INCOMPLETE, f"talk's extension is missing from {extension}", AGAIN)
    if wired.state is State.WIRED:
        return Wiring(HOST, State.WIRED, f"{wired.detail}; extension in {extension}", wired.fix)
    return wired
