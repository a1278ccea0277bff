"""`talk install codex` / `talk uninstall codex`: talk's hook door in Codex's hooks.json, trusted.

The hook (alarms/codex_hook.py, which runs `alarms.hosts.codex.hook`) runs for SessionStart,
UserPromptSubmit, PostToolUse and Stop (PostToolUse with no matcher: after every tool call, so
mail reaches a busy turn). The command names the interpreter that runs talk by its absolute path,
with `-I -S`: a `python3` found through a pyenv shim costs ~100 ms on every turn, and
site-packages are not needed (the hook imports only the standard library and talk's own folders,
which it finds beside itself).

hooks.json is merged, never overwritten: other hooks stay where they are; a talk handler found
there is replaced in place (so a reinstall keeps its trust key); running it twice changes
nothing. Codex silently skips a new or changed hook until it is trusted, so the command then
records trust as Codex's /hooks review does, through `codex app-server` (hooks/list →
config/batchWrite of `hooks.state."<key>".trusted_hash`). Without a codex program the hooks are
written but untrusted, and the command says so and exits non-zero. Uninstalling takes talk's
handlers out of hooks.json (and the groups and events they leave empty), nothing else; the trust
Codex recorded for them in config.toml names hooks that are gone then, which Codex ignores.

`wiring` reads the same two files back for `talk doctor`: Codex keys each hook by
`<hooks.json>:<event>:<group>:<handler>` and records its trust in config.toml under
`hooks.state."<key>".trusted_hash`. Only Codex can compute that hash, so a key with a recorded
hash counts as trusted here; a hook changed since (installed again without codex) is not caught.
"""

from __future__ import annotations

import copy
import os
import re
import shutil
from pathlib import Path
from typing import Any

from alarms.door import Done, Request
from alarms.host_config import edit_config, hook_command, identity_warning, place, read_config, write_config
from alarms.host_files import tighten
from alarms.hosts.codex import NAME as HOST
from alarms.wiring import State, Wiring, guarded, judge_hooks
from durable.errors import UserError

EVENTS = ("SessionStart", "UserPromptSubmit", "PostToolUse", "Stop")
HOOK_TIMEOUT_S = 10
STATUS_MESSAGE = "Checking talk mail"
SCRIPT_MARK = "codex_hook.py"  # the entry point Codex runs (alarms/codex_hook.py), old and new
AGAIN = "talk install codex"
TRUST_FIX = f"{AGAIN} (with codex on PATH, or --codex-bin PATH), or approve them in Codex with /hooks"


def codex_home(given: Path | None) -> Path:
    return (given or Path(os.environ.get("CODEX_HOME") or Path.home() / ".codex")).expanduser().resolve()


def hook_script() -> Path:
    return Path(__file__).resolve().parents[2] / "codex_hook.py"


def is_talk_handler(handler: Any) -> bool:
    return isinstance(handler, dict) and SCRIPT_MARK in str(handler.get("command", ""))


def handler_for(command: str) -> dict[str, Any]:
    return {"type": "command", "command": command, "timeout": HOOK_TIMEOUT_S,
            "statusMessage": STATUS_MESSAGE}


def _groups(doc: dict[str, Any], event: str) -> list[Any]:
    hooks = doc.setdefault("hooks", {})
    if not isinstance(hooks, dict):
        raise ValueError('"hooks" is not an object')
    groups = hooks.setdefault(event, [])
    if not isinstance(groups, list) or not all(isinstance(g, dict) for g in groups):
        raise ValueError(f'"hooks.{event}" is not a list of objects')
    return groups


def merge_hooks(doc: dict[str, Any], command: str) -> dict[str, Any]:
    """`doc` (a hooks.json) with talk's handler for each event; ValueError on a shape Codex would refuse."""
    merged = copy.deepcopy(doc)
    for event in EVENTS:
        place(_groups(merged, event), handler_for(command), is_talk_handler)
    return merged


def trust_plan(listed: Any, hooks_file: Path, command: str) -> tuple[list[str], list[dict[str, Any]]]:
    """From a hooks/list result: the keys of talk's hooks in `hooks_file`, and the edits trusting
    those not trusted yet (the hash is Codex's own, so it matches exactly what it will run)."""
    keys: list[str] = []
    edits: list[dict[str, Any]] = []
    for entry in (listed or {}).get("data", []):
        for hook in entry.get("hooks", []):
            source = hook.get("sourcePath")
            if hook.get("command") != command or not source or Path(source).resolve() != hooks_file.resolve():
                continue
            if hook["key"] in keys:
                continue  # the same hook, listed again for another cwd
            keys.append(hook["key"])
            if hook.get("trustStatus") != "trusted":
                edits.append({"keyPath": f'hooks.state."{hook["key"]}".trusted_hash',
                              "value": hook["currentHash"], "mergeStrategy": "upsert"})
    return keys, edits


def merged_hooks_file(path: Path, command: str) -> dict[str, Any]:
    try:
        return merge_hooks(read_config(path, AGAIN), command)
    except ValueError as exc:
        raise UserError(
            f"{path}: {exc}; fix it or move it aside, then run `{AGAIN}` again"
        ) from exc


def record_trust(codex_bin: str, codex_home: Path, hooks_file: Path, command: str) -> list[str]:
    """Trust talk's hooks through `codex app-server`; the keys now trusted."""
    from alarms.hosts.codex.rpc import AppServer, RpcError

    env = {**os.environ, "CODEX_HOME": str(codex_home)}
    cwd = Path.cwd()
    try:
        with AppServer.start(codex_bin, env=env, cwd=cwd) as server:
            keys, edits = trust_plan(server.request("hooks/list", {"cwds": [str(cwd)]}), hooks_file, command)
            if edits:
                server.request("config/batchWrite", {"edits": edits})
            _, left = trust_plan(server.request("hooks/list", {"cwds": [str(cwd)]}), hooks_file, command)
    except (RpcError, OSError) as exc:
        raise UserError(f"could not record trust through {codex_bin} app-server ({exc}); the hooks are "
                        f"in {hooks_file}: open Codex and approve them with /hooks") from exc
    if not keys or left:
        raise UserError(f"codex did not list talk's hooks in {hooks_file} as trusted; open Codex and "
                        "approve them with /hooks")
    return keys


def find_codex(codex_bin: str | None) -> str | None:
    if codex_bin:
        if not (shutil.which(codex_bin) or Path(codex_bin).is_file()):
            raise UserError(f"--codex-bin {codex_bin}: no such program")
        return shutil.which(codex_bin) or codex_bin
    return shutil.which("codex")


def install(request: Request) -> Done:
    """Put talk's hooks into hooks.json and record Codex's trust in them (`--codex-bin`, else codex on
    PATH); without a codex program the hooks are written but Codex skips them: `failure` says so."""
    home = codex_home(request.where)
    hooks_file = home / "hooks.json"
    command = hook_command(request.python, hook_script(), request.talk_home, request.who)
    write_config(hooks_file, merged_hooks_file(hooks_file, command))  # Codex's own file: readable as before
    tighten(paths(home))
    found = find_codex(request.program)
    if found is None:
        return Done({"hooks_file": str(hooks_file), "command": command, "trusted": []},
                    f"wrote talk's hooks to {hooks_file}", failure=(
            "NO codex program found (give --codex-bin PATH or put codex on PATH), so the hooks are NOT "
            "trusted yet and Codex will skip them without a word: start Codex, run /hooks and approve "
            "the four talk hooks, or run `talk install codex --codex-bin PATH` again"))
    keys = record_trust(found, home, hooks_file, command)
    warning = identity_warning(request.env, request.user)
    return Done({"hooks_file": str(hooks_file), "command": command, "trusted": keys},
                f"installed and trusted talk's hooks in {hooks_file}:\n" + "\n".join(f"  {k}" for k in keys),
                (warning,) if warning else ())


def remove_hooks(doc: dict[str, Any]) -> dict[str, Any] | None:
    """`doc` (a hooks.json) without talk's handlers, and the groups and events they leave empty;
    None (the file goes) when nothing is left."""
    cleaned = copy.deepcopy(doc)
    hooks = cleaned.get("hooks")
    if hooks is None:
        return cleaned
    if not isinstance(hooks, dict):
        raise ValueError('"hooks" is not an object')
    for event in EVENTS:
        groups = hooks.get(event)
        if groups is None:
            continue
        if not isinstance(groups, list) or not all(isinstance(g, dict) for g in groups):
            raise ValueError(f'"hooks.{event}" is not a list of objects')
        place(groups, None, is_talk_handler)
        if not groups:
            del hooks[event]
    if not hooks and doc.get("hooks"):
        del cleaned["hooks"]
    return cleaned or None


def uninstall(request: Request) -> Done:
    """Take talk's handlers out of Codex's hooks.json, leaving everything else as it was."""
    hooks_file = codex_home(request.where) / "hooks.json"
    changed = hooks_file.exists() and edit_config(hooks_file, remove_hooks, AGAIN)
    said = f"removed talk's hooks from {hooks_file}" if changed else f"talk was not installed in {hooks_file}"
    return Done({"hooks_file": str(hooks_file), "changed": changed}, said)


def paths(given: Path | None = None) -> list[Path]:
    """What the install writes, for `talk doctor`: Codex's home, its hooks and (recording trust) its
    config."""
    home = codex_home(given)
    return [home, home / "hooks.json", home / "config.toml"]


def trust_key(hooks_file: Path, event: str, group: int, handler: int) -> str:
    """Codex's key for one hook: the file, the event in snake case, and the hook's position."""
    return f"{hooks_file}:{re.sub(r'(?<!^)(?=[A-Z])', '_', event).lower()}:{group}:{handler}"


def talk_hooks(doc: dict[str, Any], hooks_file: Path) -> dict[str, dict[str, str]]:
    """Per event, talk's handlers in a hooks.json: trust key → command."""
    hooks = doc.get("hooks", {})
    if not isinstance(hooks, dict):
        raise ValueError('"hooks" is not an object')
    found: dict[str, dict[str, str]] = {}
    for event in EVENTS:
        groups = hooks.get(event, [])
        for g, group in enumerate(groups if isinstance(groups, list) else []):
            handlers = group.get("hooks") if isinstance(group, dict) else None
            for h, handler in enumerate(handlers if isinstance(handlers, list) else []):
                if is_talk_handler(handler):
                    found.setdefault(event, {})[trust_key(hooks_file, event, g, h)] = str(handler["command"])
    return found


def trusted_keys(config: Path) -> set[str]:
    """The hook keys Codex's config.toml records a trusted hash for; UserError naming a corrupt file."""
    import tomllib

    try:
        doc = tomllib.loads(config.read_text()) if config.exists() else {}
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise UserError(f"{config} cannot be read as TOML ({exc}); fix it or move it aside") from exc
    hooks = doc.get("hooks")
    state = hooks.get("state") if isinstance(hooks, dict) else None
    if not isinstance(state, dict):
        return set()
    return {k for k, v in state.items() if isinstance(v, dict) and v.get("trusted_hash")}


def wiring(given: Path | None = None) -> Wiring:
    """Are talk's hooks in Codex's hooks.json, complete, runnable and trusted? Reads only."""
    home = codex_home(given)
    if not home.is_dir():
        return Wiring(HOST, State.ABSENT, f"not installed (no {home})")
    return guarded(HOST, AGAIN, home / "hooks.json", lambda: _judge(home))


def _judge(home: Path) -> Wiring:
    hooks_file = home / "hooks.json"
    found = talk_hooks(read_config(hooks_file, AGAIN), hooks_file)
    hooks = judge_hooks(HOST, {e: list(v.values()) for e, v in found.items()}, EVENTS, AGAIN, hooks_file)
    if hooks.state is not State.WIRED:
        return hooks
    trusted = trusted_keys(home / "config.toml")
    left = [k for keys in found.values() for k in keys if k not in trusted]
    if left:
        return Wiring(HOST, State.UNTRUSTED, f"{len(left)} of talk's hooks in {hooks_file} are not trusted: "
                      "Codex skips them without a word", TRUST_FIX)
    return Wiring(HOST, State.WIRED, f"{hooks.detail}, trusted")
