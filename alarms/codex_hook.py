"""The Codex alarm: one hook command for SessionStart, UserPromptSubmit, PostToolUse and Stop.

Codex runs it with the hook payload (JSON) on stdin and reads one JSON object from stdout:

    SessionStart        registers the session (host codex: the process that shows the thread,
                        `alarms.codex_host`), then
    UserPromptSubmit    hands waiting mail on as added context (registers first if needed):
    PostToolUse         {"hookSpecificOutput": {"hookEventName": EVENT, "additionalContext": TEXT}}
                        (after a tool call: mail reaches the model in the middle of a turn)
    Stop                with mail waiting, {"decision": "block", "reason": TEXT}: Codex runs one
                        more turn whose input is TEXT; with none, {} lets the turn end. The last
                        resort: a turn without tool calls gives PostToolUse no chance.

A session whose host has gone (a TUI quit while Codex's app-server daemon runs a turn queued
for its thread) is given nothing: nobody would read it. An idle TUI session is woken by
`alarms.codex_waker`, which the hook starts when the session registers and again whenever it
finds the waker gone.

Mail is taken through the session's shared cursor, which moves *before* the text is printed:
the next Stop finds nothing and lets Codex stop, so a block can never repeat. A hook killed
between the cursor's save and Codex reading stdout would lose that hand-over, so the batch is
first recorded as pending (`alarms.pending`) and the next run checks Codex's rollout file
(`transcript_path`) for it: there, it is forgotten; missing after Codex moved on, it is handed
on again. A payload without `transcript_path` (an ephemeral thread) keeps the old
at-most-once behaviour: there is nothing to check against.

A broken hook must never wedge the agent: any error prints `{}`, exits 0, and is appended to
`codex-hook.log` in the identity folder. This runs on every turn, so it imports only the
standard library, `alarms`, `spool_writer` and `durable`, and those lazily; it is meant to be run as
`PYTHON -I -S .../alarms/codex_hook.py` (see `talk install codex`), which puts the folder
holding `alarms` on sys.path itself.
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

    from alarms.mailbox import SessionMail

SESSION_START = "SessionStart"
USER_PROMPT_SUBMIT = "UserPromptSubmit"
POST_TOOL_USE = "PostToolUse"
STOP = "Stop"
CONTEXT_EVENTS = (SESSION_START, USER_PROMPT_SUBMIT, POST_TOOL_USE)
HOST = "codex"
HOST_NAMES = ("codex",)
LOG_NAME = "codex-hook.log"
LOG_MAX_BYTES = 256 * 1024
TUIS_FOLDER, WAKER_LOCK = "codex", "waker.lock"  # alarms.codex_tuis.FOLDER and LOCK


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


def parse_payload(raw: str) -> tuple[str, str]:
    """The event and session id of a hook payload; ValueError if it is not one."""
    event, sid, _, _ = parse_hook(raw)
    return event, sid


def should_register(event: str, registered: bool) -> bool:
    """SessionStart always (a resumed session runs under a new pid); any event if not yet."""
    return event == SESSION_START or not registered


def output_for(event: str, text: str | None) -> dict[str, Any]:
    """What Codex is to read for `event` when `text` (framed mail) waits, or None does."""
    if text is None:
        return {}
    if event == STOP:
        return {"decision": "block", "reason": text}
    if event in CONTEXT_EVENTS:
        return {"hookSpecificOutput": {"hookEventName": event, "additionalContext": text}}
    return {}


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


def handle(raw: str, env: dict[str, str]) -> dict[str, Any]:
    """Register if due, take the session's new mail, and say what Codex should do with it."""
    event, sid, transcript, cwd = parse_hook(raw)
    if event not in (*CONTEXT_EVENTS, STOP):
        return {}
    from spool_writer.peek import nothing_new

    fast = fast_identity(env)
    if event != SESSION_START and fast is not None and nothing_new(fast, sid):
        if waker_gone(fast, sid):
            from alarms.codex_tuis import start_waker

            start_waker(fast)
        return {}
    from alarms.mailbox import identity_folder

    return deliver(identity_folder(env), event, sid, transcript, cwd)


def waker_gone(folder: str | Path, sid: str) -> bool:
    """A TUI session (it has a waker record) whose waker does not hold its lock; one stat for
    other sessions (`alarms.codex_tuis`). The look is `durable.held`'s, which imports only the
    standard library: every Codex turn runs this."""
    from spool_writer.peek import safe_sid

    if not safe_sid(sid) or not os.path.exists(os.path.join(folder, TUIS_FOLDER, sid + ".json")):
        return False
    from durable.held import held_by_other

    try:
        return not held_by_other(os.path.join(folder, TUIS_FOLDER, WAKER_LOCK))
    except OSError:
        return True  # a lock that cannot be looked at: the waker, started, says why


def deliver(folder: Path, event: str, sid: str, transcript: str | None = None,
            cwd: str | None = None) -> dict[str, Any]:
    """Lost batches again (see `alarms.pending`), then new mail, as Codex's answer to `event`."""
    from alarms import pending
    from alarms.mailbox import SessionMail

    mail = SessionMail(folder, sid)
    if not attach(mail, event, transcript, cwd):
        return {}
    records = pending.take(mail.layout, mail.sid, transcript, record=transcript is not None)
    if not records:
        return {}
    from alarms.framing import frame

    return output_for(event, frame(records))


def host_alive(mail: SessionMail) -> bool:
    """Whether the session is registered with a host process that still runs."""
    from spool_writer import registry

    record = registry.load(mail.layout).get(mail.sid)
    return record is not None and record.alive()


def attach(mail: SessionMail, event: str, transcript: str | None, cwd: str | None) -> bool:
    """Register the session with its host when due; False when no running process shows the
    thread (nothing may be handed over then: it would reach a turn nobody watches)."""
    if not should_register(event, mail.registered()) and host_alive(mail):
        return True
    from alarms.codex_host import find_host, host_is_tui
    from alarms.mailbox import host_pid

    host = find_host(host_pid(HOST_NAMES), mail.sid, cwd, dict(os.environ))
    if host is None:
        return False
    mail.register(HOST, host)
    if transcript is not None and host_is_tui(host):
        watch(mail, host, transcript, cwd)
    return True


def watch(mail: SessionMail, host: int, transcript: str, cwd: str | None) -> None:
    """Tell the waker about a TUI session, and start the waker if none runs."""
    from alarms import codex_tuis
    from alarms.codex_host import home_of

    folder = mail.layout.root.parent
    home = home_of(dict(os.environ))
    try:
        codex_bin = os.readlink(f"/proc/{host}/exe")
    except OSError:
        return  # no program to queue with: the session goes without idle wake
    if home is None:
        return
    codex_tuis.save(folder, codex_tuis.TuiSession(mail.sid, codex_bin, home, cwd or os.getcwd(), transcript))
    if waker_gone(folder, mail.sid):
        codex_tuis.start_waker(folder)


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


def log_error(env: dict[str, str], exc: BaseException, name: str = LOG_NAME) -> None:
    """Append one line about `exc` to the log `name`; past LOG_MAX_BYTES the old log becomes
    `.1` (one kept). The Gemini CLI and Copilot CLI hooks log through here too, under their own
    names."""
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


def main(argv: list[str] | None = None) -> int:
    env = env_from_args(sys.argv[1:] if argv is None else argv, dict(os.environ))
    return answer(lambda: handle(sys.stdin.read(), env), env)


def answer(handle_it: Callable[[], dict[str, Any]], env: dict[str, str], log_name: str = LOG_NAME) -> int:
    """Print what `handle_it` returns as the hook's one JSON line, and exit 0 whatever happens:
    a hook that fails must never stop its host's turn. A failure prints `{}` and is logged.
    The Gemini CLI and Copilot CLI hooks answer through here too."""
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


def _import_root() -> None:
    """Run as a script: find `alarms` and `spool_writer` beside this file, and drop the script's
    own folder from sys.path (its `mailbox.py` would shadow the standard library's)."""
    here = os.path.dirname(os.path.abspath(__file__))
    if sys.path and os.path.abspath(sys.path[0] or ".") == here:
        sys.path.pop(0)
    root = os.path.dirname(here)
    if root not in sys.path:
        sys.path.insert(0, root)


if __name__ == "__main__":
    _import_root()
    sys.exit(main())
