"""Which Claude Code session and process a door belongs to.

Claude Code gives its monitors and hooks the session id in CLAUDE_CODE_SESSION_ID and its own
pid in CLAUDE_PID, and keeps a registry record per process, `<config dir>/sessions/<pid>.json`
(its inbox socket, its status). Both run under a `bash -c` whose command line names paths with "claude" in
them, so searching the ancestors by name would find that shell, which ends at once; CLAUDE_PID
comes first and the search is only the fallback.
"""

from __future__ import annotations

import glob
import json
import os
from collections.abc import Mapping

from alarms.hosts.claude import NAME as HOST
from alarms.mailbox import host_pid
from spool_writer import process

SESSION_ENV = "CLAUDE_CODE_SESSION_ID"
PID_ENV = "CLAUDE_PID"
CONFIG_ENV = "CLAUDE_CONFIG_DIR"


def session_id(given: str | None, env: Mapping[str, str]) -> str | None:
    """The session id given (argument or payload), else the environment's; None if neither.

    A literal "${...}" is a variable Claude Code did not substitute, not an id.
    """
    for candidate in (given, env.get(SESSION_ENV)):
        if candidate and not candidate.startswith("${"):
            return candidate
    return None


def pid_from_env(env: Mapping[str, str]) -> int | None:
    raw = env.get(PID_ENV, "")
    return int(raw) if raw.isdigit() and int(raw) > 1 else None


def claude_pid(env: Mapping[str, str]) -> int:
    """The pid of the Claude Code process this door runs under."""
    pid = pid_from_env(env)
    if pid is not None and process.start_time(pid) is not None:
        return pid
    return host_pid((HOST,))


def config_dir(env: Mapping[str, str]) -> str:
    return env.get(CONFIG_ENV) or os.path.join(os.path.expanduser(env.get("HOME") or "~"), ".claude")


def records_dir(env: Mapping[str, str]) -> str:
    return os.path.join(config_dir(env), "sessions")


def read_record(env: Mapping[str, str], pid: int) -> dict[str, object] | None:
    """The registry record of the Claude Code process `pid`; None if it has none (messaging off,
    a version before 2.1.224) or it cannot be read."""
    return read_json(os.path.join(records_dir(env), f"{pid}.json"))


def read_json(path: str) -> dict[str, object] | None:
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError):  # also a record Claude Code is rewriting: judged at the next poll
        return None
    return data if isinstance(data, dict) else None


def transcript_path(sid: str, env: Mapping[str, str]) -> str | None:
    """Where Claude Code writes the session's transcript, if it has started it.

    Claude Code names it `<config dir>/projects/<cwd with every non-alphanumeric turned to '-'>/
    <sid>.jsonl`; the folder name is matched by glob rather than rebuilt, since the cwd the
    monitor runs in need not be the one Claude Code mangled. Hooks get the path in their payload.
    """
    projects = os.path.join(glob.escape(config_dir(env)), "projects")
    found = glob.glob(os.path.join(projects, "*", glob.escape(sid) + ".jsonl"))
    return found[0] if len(found) == 1 else None
