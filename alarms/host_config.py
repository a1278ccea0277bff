"""An agent host's own JSON config, edited the same way by every `talk install HOST`.

Hooks files, settings.json and mcp.json belong to the user and their host: talk reads what is
there, changes only its own entries (hook handlers it recognises, one MCP server), and writes
the file back atomically, only if something changed, keeping the file's mode less any write
bit for others (a new file is 0600: `alarms.host_files`). A file talk cannot
read as a JSON object is left as it is, with one line saying what to fix.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from alarms.host_files import write_file
from durable.errors import UserError

__all__ = [
    "edit_config", "handlers_in", "hook_command", "identity_warning", "place", "read_config", "with_server",
    "write_config",
]

Doc = dict[str, Any]


def read_config(path: Path, again: str) -> Doc:
    """The JSON object in `path` ({} if there is none); `again` is the command the error names."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise UserError(f"cannot read {path} ({exc.strerror}); fix it, then run `{again}` again") from exc
    try:
        doc = json.loads(text) if text.strip() else {}
    except ValueError as exc:
        raise UserError(f"{path} is not valid JSON ({exc}); fix it or move it aside, then run "
                        f"`{again}` again") from exc
    if not isinstance(doc, dict):
        raise UserError(f"{path} does not hold a JSON object; fix it or move it aside, then run "
                        f"`{again}` again")
    return doc


def write_config(path: Path, doc: Doc | None, new_mode: int = 0o600) -> bool:
    """Write `doc` atomically if it differs from what is there (None: remove the file); whether
    anything changed. An existing file keeps its mode, a new one gets `new_mode`: either less
    any write bit for others."""
    if doc is None:
        existed = path.exists()
        path.unlink(missing_ok=True)
        return existed
    text = json.dumps(doc, indent=2, ensure_ascii=False) + "\n"
    if path.exists() and path.read_text() == text:
        return False
    mode = path.stat().st_mode & 0o777 if path.exists() else new_mode
    write_file(path, text.encode(), mode=mode)
    return True


def edit_config(path: Path, change: Callable[[Doc], Doc | None], again: str, new_mode: int = 0o600) -> bool:
    """`change` what `path` holds and write it back; a ValueError from `change` (a shape the host
    would refuse) becomes one line naming the file."""
    try:
        doc = change(read_config(path, again))
    except ValueError as exc:
        raise UserError(f"{path}: {exc}; fix it or move it aside, then run `{again}` again") from exc
    return write_config(path, doc, new_mode)


def place(groups: list[Any], new: dict[str, Any] | None, mine: Callable[[Any], bool]) -> None:
    """In a list of hook groups (`[{"hooks": [handler, ...]}, ...]`, as Codex, Gemini CLI and Qwen
    Code nest them), put `new` where the first handler `mine` recognises is (the others go, with
    groups they leave empty), or at the end; `new` None removes them all."""
    placed = new is None
    for group in groups:
        handlers = group.get("hooks")
        if not isinstance(handlers, list) or not any(map(mine, handlers)):
            continue
        kept = []
        for handler in handlers:
            if not mine(handler):
                kept.append(handler)
            elif not placed and new is not None:
                kept.append(new)
                placed = True
        group["hooks"] = kept
    groups[:] = [g for g in groups if g.get("hooks") != []]
    if not placed and new is not None:
        groups.append({"hooks": [new]})


def handlers_in(groups: Any, mine: Callable[[Any], bool]) -> list[dict[str, Any]]:
    """The handlers `mine` recognises in a list of hook groups (as `place` lays them out); a
    shape that is not such a list holds none."""
    found: list[dict[str, Any]] = []
    for group in groups if isinstance(groups, list) else []:
        handlers = group.get("hooks") if isinstance(group, dict) else None
        found += [h for h in handlers if mine(h)] if isinstance(handlers, list) else []
    return found


def with_server(doc: Doc, name: str, entry: dict[str, Any] | None) -> Doc:
    """`doc` with `mcpServers[name]` set to `entry`, or removed (None; an emptied section goes
    too); other servers untouched. ValueError when `mcpServers` is not an object."""
    servers = doc.get("mcpServers", {})
    if not isinstance(servers, dict):
        raise ValueError('"mcpServers" is not an object')
    kept = dict(servers)  # keeps the order of the servers, and of the file's keys below
    if entry is None:
        kept.pop(name, None)
    else:
        kept[name] = entry
    out = dict(doc)
    if kept:
        out["mcpServers"] = kept
    else:
        out.pop("mcpServers", None)
    return out


def hook_command(python: str, script: Path, talk_home: str | None, user: str | None) -> str:
    """The shell-quoted command of a hook door run by path (`PYTHON -I -S SCRIPT`: no site-packages,
    the script finds `alarms` beside itself). TALK_HOME and TALK_USER given at install time are
    baked in, so the hook finds the identity however its host is started (an IDE need not carry
    the env, Gemini CLI filters it)."""
    args = [python, "-I", "-S", str(script)]
    args += ["--talk-home", talk_home] if talk_home else []
    args += ["--user", user] if user else []
    return shlex.join(args)


def identity_warning(env: Mapping[str, str], user: str | None) -> str | None:
    """What to say when the identity the installed hooks will look for does not exist yet."""
    from alarms.mailbox import NoIdentity, identity_folder

    try:
        identity_folder(dict(env, **({"TALK_USER": user} if user else {})))
    except NoIdentity as exc:
        return f"the hooks will find no mail until this is fixed: {exc} (run `talk init NAME` first)"
    return None
