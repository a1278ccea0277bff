"""`talk install pi` / `talk uninstall pi`: talk's extension and MCP server in pi's agent folder.

pi (`@earendil-works/pi-coding-agent`) loads every extension found in `<agent dir>/extensions/`
(default `~/.pi/agent`, or PI_CODING_AGENT_DIR) into each session's process. Installing copies
talk's extension (alarms/hosts/pi/extension) to `extensions/talk/` and writes `talk.json` beside it:
the interpreter talk runs on, which starts talk's door (`alarms.hosts.pi.door`), and the TALK_HOME
(and TALK_USER) to read mail from. It also merges a `talk` server into `<agent dir>/mcp.json`
(`talk mcp --host pi`, for sending and reading on demand), leaving every other server as it is.
Uninstalling removes both, and only talk's; `wiring` reads both back for `talk doctor`.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from alarms.door import Done, Request
from alarms.host_config import read_config, with_server, write_config
from alarms.host_files import copy_file, tighten, tree, write_file
from alarms.hosts.pi import NAME as HOST
from alarms.wiring import State, Wiring, guarded, missing_program, with_mcp_server
from durable.errors import UserError
from durable.home import identity_names, talk_home

AGENT_DIR_ENV = "PI_CODING_AGENT_DIR"
FOLDER = "talk"
CONFIG_FILE = "talk.json"
MCP_FILE = "mcp.json"
SERVER = "talk"
AGAIN = "talk install pi"
SHIPPED = ("index.ts",)
SERVER_ARGS = ("-I", "-m", "talk", "mcp")  # -I: no PYTHONPATH, no user site, not the cwd's modules


def extension_source() -> Path:
    """The extension as shipped in the `alarms` package."""
    return Path(__file__).resolve().parent / "extension"


def agent_dir(given: Path | None, env: Mapping[str, str]) -> Path:
    if given is not None:
        return given.expanduser().resolve()
    configured = env.get(AGENT_DIR_ENV)
    if configured:
        return Path(configured).expanduser().resolve()
    return Path(env.get("HOME") or Path.home(), ".pi", "agent").resolve()


def config_json(python: str, home: Path, user: str | None) -> dict[str, str]:
    return {"python": python, "talk_home": str(home), **({"user": user} if user else {})}


def server_entry(python: str, home: Path, user: str | None) -> dict[str, Any]:
    """`talk mcp --host pi`, run by the same interpreter; the identity baked in like talk.json's."""
    env = {"TALK_HOME": str(home), **({"TALK_USER": user} if user else {})}
    return {"command": python, "args": [*SERVER_ARGS, "--host", "pi"], "env": env,
            "description": "talk: end-to-end encrypted mail with other agents (send, peers, inbox, status)"}


def is_talk_server(entry: Any) -> bool:
    args = entry.get("args") if isinstance(entry, dict) else None
    return isinstance(args, list) and args[:len(SERVER_ARGS)] == list(SERVER_ARGS)


def merged(doc: dict[str, Any], entry: dict[str, Any] | None) -> dict[str, Any]:
    """`doc` with talk's server set (entry) or removed (None); other servers untouched.

    A server named `talk` that is not talk's own is left alone: installing then fails.
    """
    servers = doc.get("mcpServers")
    if servers is None:
        servers = {}
    if not isinstance(servers, dict):
        raise UserError(f"{MCP_FILE}: mcpServers is not an object; fix the file, then install again")
    current = servers.get(SERVER)
    if current is not None and not is_talk_server(current):
        if entry is None:
            return doc
        raise UserError(f"{MCP_FILE} already has a server named {SERVER!r} that is not talk's; "
                        "rename or remove it, then install again")
    return with_server(doc, SERVER, entry)


def install_into(agent: Path, python: str, home: Path, user: str | None) -> dict[str, str]:
    source = extension_source()
    if not all((source / name).is_file() for name in SHIPPED):
        raise UserError(f"talk's pi extension is missing from {source}; reinstall talk "
                        "(pip install --force-reinstall talk-mailbox)")
    target = agent / "extensions" / FOLDER
    for name in SHIPPED:
        copy_file(source / name, target / name)
    write_file(target / CONFIG_FILE, (json.dumps(config_json(python, home, user), indent=2) + "\n").encode())
    mcp = agent / MCP_FILE
    write_config(mcp, merged(read_config(mcp, AGAIN), server_entry(python, home, user)), new_mode=0o600)
    tighten(paths(agent))
    return {"extension_dir": str(target), "mcp_config": str(mcp)}


def paths(given: Path | None = None) -> list[Path]:
    """What the install writes, for `talk doctor`: pi's folders down to the extension (pi loads
    every extension in them), the extension, and the MCP config."""
    agent = agent_dir(given, dict(os.environ))
    pi = [agent.parent] if agent.parent.name == ".pi" else []  # not the parent of an --agent-dir
    return [*pi, agent, agent / "extensions", *tree(agent / "extensions" / FOLDER), agent / MCP_FILE]


def uninstall_from(agent: Path) -> dict[str, Any]:
    target = agent / "extensions" / FOLDER
    removed = target.is_dir()
    if removed:
        shutil.rmtree(target)
    mcp = agent / MCP_FILE
    server = False
    if mcp.exists():
        doc = read_config(mcp, AGAIN)
        after = merged(doc, None)
        server = after != doc
        if server:
            write_config(mcp, after or None, new_mode=0o600)  # nothing left: the file goes
    return {"extension_dir": str(target), "removed_extension": removed, "mcp_config": str(mcp),
            "removed_server": server}


def install(request: Request) -> Done:
    """Copy talk's pi extension into pi's agent folder and add its MCP server."""
    home = Path(talk_home(request.env)).expanduser().resolve()
    warnings = () if identity_names(str(home)) else (
        f"no identity in {home} yet: create one with `talk init NAME` before mail can arrive",)
    done = install_into(agent_dir(request.where, request.env), request.python, home, request.user)
    return Done(done, f"installed talk's pi extension in {done['extension_dir']} and its MCP server in "
                f"{done['mcp_config']}\nnew pi sessions load it; in a running one, type /reload\n"
                "each peer message then starts a turn, or joins the running one (the follower "
                "must run: talk follow --peer NAME)", warnings)


def uninstall(request: Request) -> Done:
    """Remove talk's pi extension and its MCP server entry."""
    done = uninstall_from(agent_dir(request.where, request.env))
    said = (f"removed {done['extension_dir']}" if done["removed_extension"]
            else f"no talk extension in {done['extension_dir']}")
    said += f"; {'removed' if done['removed_server'] else 'no'} talk server in {done['mcp_config']}"
    return Done(done, said)


def wiring(given: Path | None = None) -> Wiring:
    """Are talk's extension and MCP server in pi's agent folder, and runnable? Reads only."""
    agent = agent_dir(given, dict(os.environ))
    if not agent.is_dir():
        return Wiring(HOST, State.ABSENT, f"not installed (no {agent})")
    return guarded(HOST, AGAIN, agent / MCP_FILE, lambda: _judge(agent))


def _judge(agent: Path) -> Wiring:
    target, mcp = agent / "extensions" / FOLDER, agent / MCP_FILE
    servers = read_config(mcp, AGAIN).get("mcpServers")
    entry = servers.get(SERVER) if isinstance(servers, dict) else None
    entry = entry if is_talk_server(entry) else None
    if not target.is_dir() and entry is None:
        return Wiring(HOST, State.UNWIRED, f"talk is not installed (no {target})")
    if not all((target / name).is_file() for name in (*SHIPPED, CONFIG_FILE)):
        return Wiring(HOST, State.INCOMPLETE, f"talk's extension in {target} is missing files", AGAIN)
    python = str(read_config(target / CONFIG_FILE, AGAIN).get("python", ""))
    gone = missing_program([python])
    if gone:
        return Wiring(HOST, State.STALE, f"talk's extension in {target} runs {gone}, which is gone", AGAIN)
    return with_mcp_server(Wiring(HOST, State.WIRED, f"extension in {target}"), entry, mcp, AGAIN)
