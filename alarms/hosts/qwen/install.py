"""`talk install qwen` / `talk uninstall qwen`: wire talk into Qwen Code, and take it out again.

Installing merges into `$QWEN_HOME/settings.json` (default `~/.qwen`), repeatable without harm:

- a SessionStart hook that starts the Qwen door (`alarms.hosts.qwen.daemon --ensure`; it prints nothing, so
  nothing reaches the model) and the MCP server `talk` (`talk mcp --host qwen`); a talk entry
  found there is replaced in place;
- `agents.crossSessionInbound: "accept"`, only where the user has not set it. The door writes as
  an ordinary peer (so Qwen tells the model the mail is not from the user), and Qwen holds a
  plain peer's message for review unless this policy accepts it; talk claims no review class it
  cannot vouch for. `accept` applies to every peer's messages, which is said in the output. A
  value the user set (`hold`, `refuse`, even `accept`) is never touched.

Everything else in the file stays as it was. What was done is recorded in the identity folder
(`qwen-install.json`), so uninstalling takes out the entries and `crossSessionInbound` only if
install set it (and it still says `accept`). Both revoke a controller grant an earlier version of
this installer minted (`qwen-controller.json`): talk no longer presents itself as a program that
speaks for the user. `wiring` reads settings.json back for `talk doctor`.
"""

from __future__ import annotations

import copy
import json
import os
import shlex
import shutil
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from alarms.door import Done, Request
from alarms.host_config import handlers_in, place, read_config, with_server, write_config
from alarms.host_files import tighten
from alarms.hosts.qwen import NAME as HOST
from alarms.wiring import State, Wiring, guarded, judge_hooks, with_mcp_server
from durable.errors import UserError
from durable.files import read_json, write_json

SERVER_NAME = "talk"
AGAIN = "talk install qwen"
# `-m alarms.hosts.qwen.daemon`, and `-m alarms.qwen` as installs before the move wrote it
HOOK_MARKS = ("alarms.hosts.qwen.", "alarms.qwen ")
HOOK_TIMEOUT_S = 30
INBOUND = "crossSessionInbound"  # under "agents"
ACCEPT = "accept"
QWEN_TIMEOUT_S = 60.0


def hook_command(python: str, talk_home: str | None, user: str | None) -> str:
    args = [python, "-I", "-m", "alarms.hosts.qwen.daemon", "--ensure"]
    args += ["--talk-home", talk_home] if talk_home else []
    args += ["--user", user] if user else []
    return shlex.join(args)


def mcp_entry(python: str, talk_home: str | None, user: str | None) -> dict[str, Any]:
    env = {k: v for k, v in (("TALK_HOME", talk_home), ("TALK_USER", user)) if v}
    entry: dict[str, Any] = {"command": python, "args": ["-I", "-m", "talk", "mcp", "--host", "qwen"]}
    return {**entry, "env": env} if env else entry


def is_talk_handler(handler: Any) -> bool:
    command = str(handler.get("command", "")) + " " if isinstance(handler, dict) else ""
    return any(mark in command for mark in HOOK_MARKS)


def _session_start(doc: dict[str, Any]) -> list[Any]:
    hooks = doc.setdefault("hooks", {})
    if not isinstance(hooks, dict):
        raise ValueError('"hooks" is not an object')
    groups = hooks.setdefault("SessionStart", [])
    if not isinstance(groups, list) or not all(isinstance(g, dict) for g in groups):
        raise ValueError('"hooks.SessionStart" is not a list of objects')
    return groups


def _without_talk(groups: list[Any]) -> list[Any]:
    kept = []
    for group in groups:
        handlers = group.get("hooks")
        if isinstance(handlers, list) and any(map(is_talk_handler, handlers)):
            group = {**group, "hooks": [h for h in handlers if not is_talk_handler(h)]}
            if not group["hooks"]:
                continue
        kept.append(group)
    return kept


def merge(doc: dict[str, Any], command: str, server: dict[str, Any]) -> dict[str, Any]:
    """`doc` (Qwen's settings.json) with talk's hook and MCP server; ValueError on a shape Qwen
    would refuse."""
    merged = copy.deepcopy(doc)
    groups = _session_start(merged)
    handler = {"type": "command", "command": command, "name": "talk", "timeout": HOOK_TIMEOUT_S}
    place(groups, handler, is_talk_handler)
    return with_server(merged, SERVER_NAME, server)


def unmerge(doc: dict[str, Any]) -> dict[str, Any]:
    """`doc` without talk's hook and MCP server (events and sections left empty go too)."""
    out = copy.deepcopy(doc)
    hooks = out.get("hooks")
    if isinstance(hooks, dict) and isinstance(hooks.get("SessionStart"), list):
        groups = _without_talk([g for g in hooks["SessionStart"] if isinstance(g, dict)])
        if groups:
            hooks["SessionStart"] = groups
        else:
            del hooks["SessionStart"]
        if not hooks:
            del out["hooks"]
    servers = out.get("mcpServers")
    return with_server(out, SERVER_NAME, None) if isinstance(servers, dict) else out


def _agents(doc: dict[str, Any]) -> dict[str, Any] | None:
    agents = doc.get("agents")
    if agents is not None and not isinstance(agents, dict):
        raise ValueError('"agents" is not an object')
    return agents


def accept_peers(doc: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    """`doc` with `agents.crossSessionInbound: "accept"` where it is unset, and whether it set it;
    a value the user set stays, whatever it is."""
    agents = _agents(doc)
    if agents is not None and INBOUND in agents:
        return doc, False
    out = copy.deepcopy(doc)
    out.setdefault("agents", {})[INBOUND] = ACCEPT
    return out, True


def restore_peers(doc: dict[str, Any]) -> dict[str, Any]:
    """`doc` without the `accept` install set (an `agents` left empty goes too); any other value,
    which the user has set since, stays."""
    agents = doc.get("agents")
    if not isinstance(agents, dict) or agents.get(INBOUND) != ACCEPT:
        return doc
    out = copy.deepcopy(doc)
    del out["agents"][INBOUND]
    if not out["agents"]:
        del out["agents"]
    return out


def find_qwen(qwen_bin: str | None) -> str:
    found = shutil.which(qwen_bin or "qwen") or (qwen_bin if qwen_bin and Path(qwen_bin).is_file() else None)
    if found is None:
        raise UserError(f"no {'program ' + qwen_bin if qwen_bin else 'qwen program on PATH'}: install Qwen "
                        "Code (npm install -g @qwen-code/qwen-code) or give --qwen-bin PATH")
    return found


def _qwen(qwen: str, home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "QWEN_HOME": str(home)}
    try:
        return subprocess.run([qwen, *args], env=env, capture_output=True, text=True, timeout=QWEN_TIMEOUT_S,
                              stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise UserError(f"could not run {qwen} {' '.join(args)} ({exc})") from exc


def _said(done: subprocess.CompletedProcess[str]) -> str:
    return (done.stderr or done.stdout).strip()[-300:]


def listed_controllers(qwen: str, home: Path) -> set[str]:
    done = _qwen(qwen, home, "sessions", "controllers", "list", "--json")
    if done.returncode != 0:
        raise UserError(f"qwen sessions controllers list failed: {_said(done)}")
    ids = set()
    for line in done.stdout.splitlines():
        try:
            obj = json.loads(line)
        except ValueError:
            continue
        if isinstance(obj, dict) and isinstance(obj.get("id"), str):
            ids.add(obj["id"])
    return ids


def revoke_legacy(folder: Path, home: Path, qwen_bin: str | None) -> str | None:
    """Revoke the controller grant an earlier `talk install qwen` minted, if there is one, and
    delete its token file; the grant's id, or None."""
    from alarms.hosts.qwen.status import DoorFiles

    path = DoorFiles(folder).legacy_controller
    grant = read_json(path, None)
    if not (isinstance(grant, dict) and isinstance(grant.get("id"), str)):
        path.unlink(missing_ok=True)
        return None
    where = grant.get("qwen_home")
    minted_in = Path(where) if isinstance(where, str) and where.startswith("/") else home
    qwen = find_qwen(qwen_bin)
    if grant["id"] in listed_controllers(qwen, minted_in):
        done = _qwen(qwen, minted_in, "sessions", "controllers", "remove", grant["id"])
        if done.returncode != 0:
            raise UserError(f"qwen sessions controllers remove {grant['id']} failed: {_said(done)}; "
                            f"remove it with that command, then delete {path}")
    path.unlink()
    return str(grant["id"])


def _identity(user: str | None, environ: Mapping[str, str] = os.environ) -> Path:
    from alarms.mailbox import NoIdentity, identity_folder

    env = dict(environ, **({"TALK_USER": user} if user else {}))
    try:
        return identity_folder(env)
    except NoIdentity as exc:
        raise UserError(f"{exc}; run `talk init NAME` first (the Qwen door needs an identity)") from exc


def _home(qwen_home: Path | None) -> Path:
    from alarms.hosts.qwen.registry import qwen_home as default_home

    return (qwen_home or default_home()).expanduser().resolve()


def install(request: Request) -> Done:
    """Install talk into Qwen Code: the door's SessionStart hook, the MCP server, and peer messages
    accepted where Qwen's policy for them is unset."""
    from alarms.hosts.qwen.status import DoorFiles

    home, folder = _home(request.where), _identity(request.user, request.env)
    files = DoorFiles(folder)
    revoked = revoke_legacy(folder, home, request.program)
    talk_home, talk_user = request.talk_home, request.who
    settings = home / "settings.json"
    before = read_json(files.install, None)
    ours = (isinstance(before, dict) and before.get("qwen_home") == str(home)
            and before.get("set_inbound") is True)
    try:
        doc = merge(read_config(settings, AGAIN), hook_command(request.python, talk_home, talk_user),
                    mcp_entry(request.python, talk_home, talk_user))
        doc, set_now = accept_peers(doc)
        policy = (_agents(doc) or {}).get(INBOUND)
    except ValueError as exc:
        raise UserError(f"{settings}: {exc}; fix it or move it aside, then run `talk install qwen` "
                        "again") from exc
    set_inbound = set_now or (ours and policy == ACCEPT)
    write_json(files.install, {"qwen_home": str(home), "set_inbound": set_inbound})
    write_config(settings, doc, new_mode=0o600)
    tighten(paths(home))
    if set_now:
        said = (f'set agents.{INBOUND} to "{ACCEPT}" (it was unset): Qwen delivers messages from other '
                "sessions, talk's mail among them, without asking you first, marked as not from you; "
                f'set it to "hold" to review each in /peers')
    elif policy == ACCEPT:
        said = f'agents.{INBOUND} is "{ACCEPT}": talk mail is delivered, marked as not from you'
    else:
        said = (f'agents.{INBOUND} stays "{policy}" as you set it: talk mail '
                + ("waits for your review in /peers" if policy == "hold" else "is not delivered"))
    return Done({"settings": str(settings), "inbound": policy, "set_inbound": set_now, "revoked": revoked},
                f"installed talk into Qwen Code: {settings} (SessionStart hook, MCP server \"talk\"); {said}"
                + (f"; revoked the old controller grant {revoked}" if revoked else ""))


def uninstall(request: Request) -> Done:
    """Take talk out of Qwen Code: the hook, the MCP server, the policy install set, an old
    controller grant."""
    from alarms.hosts.qwen.status import DoorFiles, running_pid
    from durable import daemon

    home, folder = _home(request.where), _identity(request.user, request.env)
    files = DoorFiles(folder)
    record = read_json(files.install, None)
    set_inbound = isinstance(record, dict) and record.get("set_inbound") is True
    settings = home / "settings.json"
    changed = False
    if settings.exists():
        doc = unmerge(read_config(settings, AGAIN))
        left = restore_peers(doc) if set_inbound else doc
        changed = write_config(settings, left or None, new_mode=0o600)  # nothing left: the file goes
    revoked = revoke_legacy(folder, home, request.program)
    files.install.unlink(missing_ok=True)
    pid = running_pid(folder)
    if pid is not None and pid > 0:
        daemon.stop([pid], lambda: running_pid(folder) is not None, "Qwen door")
    grant = f", revoked controller {revoked}" if revoked else ""
    said = (f"removed talk from Qwen Code ({settings}{grant})" if changed or revoked
            else f"talk was not installed in Qwen Code ({settings})")
    return Done({"settings": str(settings), "changed": changed, "revoked": revoked}, said)


def paths(given: Path | None = None) -> list[Path]:
    """What the install writes, for `talk doctor`: Qwen Code's home and its settings."""
    home = _home(given)
    return [home, home / "settings.json"]


def wiring(given: Path | None = None) -> Wiring:
    """Are talk's SessionStart hook and MCP server in Qwen Code's settings.json, and runnable? Reads only."""
    home = _home(given)
    if not home.is_dir():
        return Wiring(HOST, State.ABSENT, f"not installed (no {home})")
    settings = home / "settings.json"
    return guarded(HOST, AGAIN, settings, lambda: _judge(settings))


def _judge(settings: Path) -> Wiring:
    doc = read_config(settings, AGAIN)
    hooks = doc.get("hooks")
    groups = hooks.get("SessionStart") if isinstance(hooks, dict) else None
    found = {"SessionStart": [str(h.get("command")) for h in handlers_in(groups, is_talk_handler)]}
    servers = doc.get("mcpServers")
    entry = servers.get(SERVER_NAME) if isinstance(servers, dict) else None
    hooks = judge_hooks(HOST, found, ["SessionStart"], AGAIN, settings)
    wired = with_mcp_server(hooks, entry, settings, AGAIN)
    policy = (_agents(doc) or {}).get(INBOUND)
    if wired.state is State.WIRED and policy != ACCEPT:
        held = "waits for your review in /peers" if policy == "hold" else "is not delivered"
        return Wiring(HOST, State.WIRED, f'{wired.detail}; agents.{INBOUND} is "{policy}": talk mail {held}')
    return wired
