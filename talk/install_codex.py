"""`talk install codex`: put talk's hook into Codex's hooks.json and record Codex's trust in it.

The hook (alarms/codex_hook.py) runs for SessionStart, UserPromptSubmit, PostToolUse and Stop
(PostToolUse with no matcher: after every tool call, so mail reaches a busy turn). The command
names the interpreter that runs talk by its absolute path, with `-I -S`: a `python3` found
through a pyenv shim costs ~100 ms on every turn, and site-packages are not needed (the hook
imports only the standard library and talk's own folders, which it finds beside itself).

hooks.json is merged, never overwritten: other hooks stay where they are; a talk handler found
there is replaced in place (so a reinstall keeps its trust key); running it twice changes
nothing. Codex silently skips a new or changed hook until it is trusted, so the command then
records trust as Codex's /hooks review does, through `codex app-server` (hooks/list →
config/batchWrite of `hooks.state."<key>".trusted_hash`). Without a codex program the hooks are
written but untrusted, and the command says so and exits non-zero.
"""

from __future__ import annotations

import copy
import json
import os
import shlex
import shutil
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from durable.errors import UserError
from durable.files import replace_file
from talk.options import Json, User
from talk.output import result, warn

EVENTS = ("SessionStart", "UserPromptSubmit", "PostToolUse", "Stop")
HOOK_TIMEOUT_S = 10
STATUS_MESSAGE = "Checking talk mail"
SCRIPT_MARK = "codex_hook.py"


def hook_script() -> Path:
    import alarms

    return Path(alarms.__file__).resolve().parent / "codex_hook.py"


def hook_command(python: str, script: Path, talk_home: str | None, user: str | None) -> str:
    """The shell-quoted command; TALK_HOME and TALK_USER given at install time are baked in, so
    the hook finds the identity however Codex is started (an IDE need not carry the env)."""
    args = [python, "-I", "-S", str(script)]
    args += ["--talk-home", talk_home] if talk_home else []
    args += ["--user", user] if user else []
    return shlex.join(args)


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


def _place(groups: list[Any], new: dict[str, Any]) -> None:
    """Put `new` where the first talk handler is (others go, with groups they leave empty), or at the end."""
    placed = False
    for group in groups:
        handlers = group.get("hooks")
        if not isinstance(handlers, list) or not any(map(is_talk_handler, handlers)):
            continue
        kept = []
        for h in handlers:
            if not is_talk_handler(h):
                kept.append(h)
            elif not placed:
                kept.append(new)
                placed = True
        group["hooks"] = kept
    groups[:] = [g for g in groups if g.get("hooks") != []]
    if not placed:
        groups.append({"hooks": [new]})


def merge_hooks(doc: dict[str, Any], command: str) -> dict[str, Any]:
    """`doc` (a hooks.json) with talk's handler for each event; ValueError on a shape Codex would refuse."""
    merged = copy.deepcopy(doc)
    for event in EVENTS:
        _place(_groups(merged, event), handler_for(command))
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


def read_hooks_file(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text()
    except FileNotFoundError:
        return {}
    try:
        doc = json.loads(text) if text.strip() else {}
    except ValueError as exc:
        raise UserError(f"{path} is not valid JSON ({exc}); fix it or move it aside, then run "
                        "`talk install codex` again") from exc
    if not isinstance(doc, dict):
        raise UserError(f"{path} does not hold a JSON object; fix it or move it aside, then run "
                        "`talk install codex` again")
    return doc


def merged_hooks_file(path: Path, command: str) -> dict[str, Any]:
    try:
        return merge_hooks(read_hooks_file(path), command)
    except ValueError as exc:
        raise UserError(
            f"{path}: {exc}; fix it or move it aside, then run `talk install codex` again"
        ) from exc


def write_hooks_file(path: Path, doc: dict[str, Any]) -> bool:
    """Write `doc` atomically if it differs from what is there; whether it was written."""
    text = json.dumps(doc, indent=2) + "\n"
    if path.exists() and path.read_text() == text:
        return False
    path.parent.mkdir(parents=True, exist_ok=True)
    replace_file(path, text.encode(), mode=0o644)  # Codex's own config: readable as before
    return True


def record_trust(codex_bin: str, codex_home: Path, hooks_file: Path, command: str) -> list[str]:
    """Trust talk's hooks through `codex app-server`; the keys now trusted."""
    from alarms.codex_rpc import AppServer, RpcError

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


def install_codex_command(
    codex_home: Annotated[
        Path | None,
        typer.Option("--codex-home", help="Codex's home folder (default: CODEX_HOME or ~/.codex)."),
    ] = None,
    codex_bin: Annotated[
        str | None, typer.Option("--codex-bin", help="The codex program, to record trust (default: on PATH).")
    ] = None,
    user: User = None,
    as_json: Json = False,
) -> None:
    """Install talk's Codex hooks (mail at session start, with each prompt, after each tool call, and at
    the end of a turn)."""
    home = (codex_home or Path(os.environ.get("CODEX_HOME") or Path.home() / ".codex")).expanduser().resolve()
    hooks_file = home / "hooks.json"
    command = hook_command(sys.executable, hook_script(), os.environ.get("TALK_HOME"),
                           user or os.environ.get("TALK_USER"))
    write_hooks_file(hooks_file, merged_hooks_file(hooks_file, command))
    found = find_codex(codex_bin)
    if found is None:
        result({"hooks_file": str(hooks_file), "command": command, "trusted": []},
               f"wrote talk's hooks to {hooks_file}", as_json)
        raise UserError(
            "NO codex program found (give --codex-bin PATH or put codex on PATH), so the hooks are NOT "
            "trusted yet and Codex will skip them without a word: start Codex, run /hooks and approve "
            "the four talk hooks, or run `talk install codex --codex-bin PATH` again"
        )
    keys = record_trust(found, home, hooks_file, command)
    result({"hooks_file": str(hooks_file), "command": command, "trusted": keys},
           f"installed and trusted talk's hooks in {hooks_file}:\n" + "\n".join(f"  {k}" for k in keys),
           as_json)
    _warn_without_identity(user)


def _warn_without_identity(user: str | None) -> None:
    from alarms.mailbox import NoIdentity, identity_folder

    env = dict(os.environ, **({"TALK_USER": user} if user else {}))
    try:
        identity_folder(env)
    except NoIdentity as exc:
        warn(f"the hooks will find no mail until this is fixed: {exc} (run `talk init NAME` first)")
