"""The Codex door: one hook command for SessionStart, UserPromptSubmit, PostToolUse and Stop.

Codex runs it with the hook payload (JSON) on stdin and reads one JSON object from stdout:

    SessionStart        registers the session (host codex: the process that shows the thread,
                        `alarms.hosts.codex.host`), then
    UserPromptSubmit    hands waiting mail on as added context (registers first if needed):
    PostToolUse         {"hookSpecificOutput": {"hookEventName": EVENT, "additionalContext": TEXT}}
                        (after a tool call: mail reaches the model in the middle of a turn)
    Stop                with mail waiting, {"decision": "block", "reason": TEXT}: Codex runs one
                        more turn whose input is TEXT; with none, {} lets the turn end. The last
                        resort: a turn without tool calls gives PostToolUse no chance.

Codex hands added context to the model only as a developer message (measured on 0.171.0), so
that frame says so (`alarms.framing`); Stop's reason arrives as user input, in a `<hook_prompt>`
element with `<`, `>` and `&` escaped. A lower channel mid-turn does not exist: PostToolUse's
`decision: block` would replace the tool's output with the mail (the model would lose the
output and read the call as failed).

A session whose host has gone (a TUI quit while Codex's app-server daemon runs a turn queued
for its thread) is given nothing: nobody would read it. An idle TUI session is woken by
`alarms.hosts.codex.waker`, which the hook starts when the session registers and again whenever it
finds the waker gone.

Mail is taken through the session's shared cursor, which moves *before* the text is printed:
the next Stop finds nothing and lets Codex stop, so a block can never repeat. A hook killed
between the cursor's save and Codex reading stdout would lose that hand-over, so the batch is
first recorded as pending (`alarms.handover`) and the next run checks Codex's rollout file
(`transcript_path`) for it: there, it is forgotten; missing after Codex moved on, it is handed
on again. A payload without `transcript_path` (an ephemeral thread) keeps the old
at-most-once behaviour: there is nothing to check against.

Under `talk run codex` the app-server that runs these hooks carries DOOR_ENV, the lock of that
session's own door (`alarms.hosts.codex.remote_door`): while a process holds it, the hook hands
nothing over and starts no waker. The door gives mail as user-role input, and one cursor and one
door per session keep it exactly once; a door that died leaves the hooks in charge again.

A broken hook must never wedge the agent: any error prints `{}`, exits 0, and is appended to
`codex-hook.log` in the identity folder. This runs on every turn, so it imports only the
standard library, `alarms`, `spool_writer` and `durable`, and those lazily; it is meant to be run as
`PYTHON -I -S .../alarms/codex_hook.py` (see `talk install codex`), which puts the folder
holding `alarms` on sys.path itself and runs `main` here. The hook runtime it stands on (the
payload, the fast path, the answer, the error log) is `alarms.hook_runtime`.
"""

from __future__ import annotations

import os
import sys

from alarms.hook_runtime import (
    SESSION_START,
    answer,
    env_from_args,
    fast_identity,
    parse_hook,
    should_register,
)
from alarms.hosts.codex import NAME as HOST
from alarms.hosts.codex import PROCESS_NAMES as HOST_NAMES
from spool_writer.peek import nothing_new, safe_sid

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: importing typing costs a turn ~3 ms
if TYPE_CHECKING:
    from pathlib import Path
    from typing import Any

    from alarms.mailbox import SessionMail

__all__ = ["main"]

USER_PROMPT_SUBMIT = "UserPromptSubmit"
POST_TOOL_USE = "PostToolUse"
STOP = "Stop"
CONTEXT_EVENTS = (SESSION_START, USER_PROMPT_SUBMIT, POST_TOOL_USE)
CONTEXT_CHANNEL = "a developer message"  # how Codex shows additionalContext to the model
LOG_NAME = "codex-hook.log"
TUIS_FOLDER, WAKER_LOCK = "codex", "waker.lock"  # alarms.hosts.codex.tuis.FOLDER and LOCK
DOOR_ENV = "TALK_CODEX_DOOR"  # alarms.hosts.codex.launch.DOOR_ENV


def parse_payload(raw: str) -> tuple[str, str]:
    """The event and session id of a hook payload; ValueError if it is not one."""
    event, sid, _, _ = parse_hook(raw)
    return event, sid


def output_for(event: str, text: str | None) -> dict[str, Any]:
    """What Codex is to read for `event` when `text` (framed mail) waits, or None does."""
    if text is None:
        return {}
    if event == STOP:
        return {"decision": "block", "reason": text}
    if event in CONTEXT_EVENTS:
        return {"hookSpecificOutput": {"hookEventName": event, "additionalContext": text}}
    return {}


def handle(raw: str, env: dict[str, str]) -> dict[str, Any]:
    """Register if due, take the session's new mail, and say what Codex should do with it."""
    event, sid, transcript, cwd = parse_hook(raw)
    if event not in (*CONTEXT_EVENTS, STOP) or door_open(env):
        return {}
    fast = fast_identity(env)
    if event != SESSION_START and fast is not None and nothing_new(fast, sid):
        if waker_gone(fast, sid):
            from alarms.hosts.codex.tuis import start_waker

            start_waker(fast)
        return {}
    from alarms.mailbox import identity_folder

    return deliver(identity_folder(env), event, sid, transcript, cwd)


def door_open(env: dict[str, str]) -> bool:
    """Whether this session's `talk run codex` door lives (it then hands the mail over)."""
    path = env.get(DOOR_ENV)
    if not path:
        return False
    from durable.held import held_by_other

    try:
        return held_by_other(path)
    except OSError:
        return False  # not a lock we can look at: the hooks deliver


def waker_gone(folder: str | Path, sid: str) -> bool:
    """A TUI session (it has a waker record) whose waker does not hold its lock; one stat for
    other sessions (`alarms.hosts.codex.tuis`). The look is `durable.held`'s, which imports only the
    standard library: every Codex turn runs this."""
    if not safe_sid(sid) or not os.path.exists(os.path.join(folder, TUIS_FOLDER, sid + ".json")):
        return False
    from durable.held import held_by_other

    try:
        return not held_by_other(os.path.join(folder, TUIS_FOLDER, WAKER_LOCK))
    except OSError:
        return True  # a lock that cannot be looked at: the waker, started, says why


def deliver(folder: Path, event: str, sid: str, transcript: str | None = None,
            cwd: str | None = None) -> dict[str, Any]:
    """Lost batches again (see `alarms.handover`), then new mail, as Codex's answer to `event`."""
    from alarms import handover
    from alarms.mailbox import SessionMail

    mail = SessionMail(folder, sid)
    if not attach(mail, event, transcript, cwd):
        return {}
    records = handover.take(mail.layout, mail.sid, transcript, record=transcript is not None)
    if not records:
        return {}
    from alarms.framing import frame

    return output_for(event, frame(records, channel=CONTEXT_CHANNEL if event in CONTEXT_EVENTS else None))


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
    from alarms.hosts.codex.host import find_host, host_is_tui
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
    from alarms.hosts.codex import tuis as codex_tuis
    from alarms.hosts.codex.host import home_of

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


def main(argv: list[str] | None = None) -> int:
    env = env_from_args(sys.argv[1:] if argv is None else argv, dict(os.environ))
    return answer(lambda: handle(sys.stdin.read(), env), env, LOG_NAME)


if __name__ == "__main__":
    sys.exit(main())
