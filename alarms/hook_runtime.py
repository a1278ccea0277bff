"""What every hook door runs on: the payload, the answer, the error log.

A hook door (Codex, Gemini CLI, Copilot CLI) is a short process its host starts on each turn,
with a JSON payload on stdin and one JSON object expected on stdout. This module is what they
share: reading the payload, taking TALK_HOME and TALK_USER from the command line, and answering
`{}` with the error logged when anything fails (a hook must never stop its host's turn). The fast
"nothing new" answer most turns get is the spool's own (`spool_writer.peek`).

It imports only the standard library, at the top, and `durable.home` lazily: every hook turn
pays for its imports (see bench/hook_latency.py).
"""

from __future__ import annotations

import itertools
import json
import os
import sys

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: importing typing costs a turn ~3 ms
if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path
    from typing import Any

__all__ = ["answer", "env_from_args", "fast_identity", "log_error", "parse_hook", "should_register"]

SESSION_START = "SessionStart"
LOG_MAX_BYTES = 256 * 1024


def parse_hook(raw: str) -> tuple[str, str, str | None, str | None]:
    """The event, session id, transcript path and cwd (None if absent) of a hook payload;
    ValueError if it is not one."""
    data = json.loads(raw)
    if not isinstance(data, dict):
        raise ValueError("hook payload is not a JSON object")
    event, sid, transcript = data.get("hook_event_name"), data.get("session_id"), data.get("transcript_path")
    if not isinstance(event, str) or not isinstance(sid, str) or not sid:
        raise ValueError("hook payload lacks hook_event_name or session_id")
    cwd = data.get("cwd")
    return (event, sid, transcript if isinstance(transcript, str) and transcript else None,
            cwd if isinstance(cwd, str) and cwd else None)


def should_register(event: str, registered: bool) -> bool:
    """SessionStart always (a resumed session runs under a new pid); any event if not yet."""
    return event == SESSION_START or not registered


def env_from_args(argv: list[str], env: dict[str, str]) -> dict[str, str]:
    """`--talk-home DIR` and `--user NAME` (written by `talk install codex`) override the env."""
    env = dict(env)
    names = {"--talk-home": "TALK_HOME", "--user": "TALK_USER"}
    for flag, value in itertools.pairwise(argv):
        if flag in names:
            env[names[flag]] = value
    return env


def fast_identity(env: dict[str, str]) -> str | None:
    """alarms.mailbox.identity_folder without pathlib (~4 ms a turn); None when that one must
    decide (and explain): TALK_USER names no identity, or there are none or several."""
    from durable.home import identity_names, talk_home

    home = talk_home(env)
    names, user = identity_names(home), env.get("TALK_USER")
    if user:
        return os.path.join(home, user) if user in names else None
    return os.path.join(home, names[0]) if len(names) == 1 else None


def log_folder(env: dict[str, str]) -> Path | None:
    """Where to log an error: the identity folder, else TALK_HOME if it exists, else nowhere."""
    from pathlib import Path

    from alarms.mailbox import identity_folder

    try:
        return identity_folder(env)
    except Exception:
        from durable.home import talk_home

        home = Path(talk_home(env))
        return home if home.is_dir() else None


def log_error(env: dict[str, str], exc: BaseException, name: str) -> None:
    """Append one line about `exc` to the log `name`; past LOG_MAX_BYTES the old log becomes
    `.1` (one kept). Each hook door logs under its own name."""
    import time

    folder = log_folder(env)
    if folder is None:
        return
    path = folder / name
    if path.exists() and path.stat().st_size > LOG_MAX_BYTES:
        os.replace(path, path.with_name(name + ".1"))
    line = f"{time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())} {type(exc).__name__}: {exc}\n"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o600)
    try:
        os.write(fd, line.encode(errors="replace"))
    finally:
        os.close(fd)


def answer(handle_it: Callable[[], dict[str, Any]], env: dict[str, str], log_name: str) -> int:
    """Print what `handle_it` returns as the hook's one JSON line, and exit 0 whatever happens:
    a hook that fails must never stop its host's turn. A failure prints `{}` and is logged."""
    try:
        out = handle_it()
    except Exception as exc:
        out = {}
        import contextlib

        with contextlib.suppress(Exception):  # nowhere to say it; the host must still get its {}
            log_error(env, exc, log_name)
    try:
        sys.stdout.write(json.dumps(out, ensure_ascii=False) + "\n")
        sys.stdout.flush()
    except OSError:
        pass
    return 0

