"""The GitHub Copilot CLI door: one hook command for sessionStart, userPromptSubmitted,
postToolUse and agentStop.

Copilot CLI runs `PYTHON -I -m alarms.hosts.copilot.hook EVENT` (see `talk install copilot`) with the
camelCase payload on stdin, which carries `sessionId` and `cwd` but not the event's name, so the
event is the command's argument. It reads one JSON object from stdout:

    sessionStart         registers the session with its host (the `copilot` process above the
                         hook); waiting mail is left for the first prompt's hook, which puts it
                         into that same first request
    userPromptSubmitted  {"additionalContext": TEXT}, shown to the model with the prompt, inside
                         a `<system_reminder>` Copilot adds to it (the frame says so)
    postToolUse          {"additionalContext": TEXT}, appended to the tool's result (the model
                         sees it as tool output): mail reaches the model in the middle of a turn
    agentStop            with mail waiting, {"decision": "block", "reason": TEXT}: Copilot runs one
                         more turn whose prompt is TEXT; with none, {} lets the turn end

Measured on Copilot CLI 1.0.102: postToolUse's additionalContext is cut, without a word, at
10,240 characters; the prompt hook's context and a stop reason reached the model whole at
200,000 and 70,000. So postToolUse takes only the messages that fit whole, leaving the rest
for the stop; the prompt and stop hooks take everything, and a message longer than was ever
seen to arrive whole earns `written`, not `delivered`.

Mail is taken through the session's cursor, which moves before the text is printed, so a
block never repeats. The batch is recorded as pending first (`alarms.handover`) and checked
against the session's event log (`~/.copilot/session-state/SID/events.jsonl`), where Copilot
writes each hook's output as it takes it: a hook killed before its answer reached Copilot
leaves its batch missing there, and a later hook hands it on again. Copilot writes that log
about 100 ms behind its events, so a hook that finds a batch not in the log yet first waits
(up to a second) until the log has caught up with its own event.

No hook wakes an idle interactive session: mail that arrives then waits for the next prompt (or
`talk inbox` over MCP), unless the session was started by `talk run copilot`, whose door
(`ui_door`) shares this session's cursor and starts a turn. A broken hook must never wedge the
agent: any error prints `{}`, exits 0, and is appended to `copilot-hook.log` in the identity folder.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

from alarms.hook_runtime import answer, env_from_args, fast_identity
from alarms.hosts.copilot import NAME as HOST
from alarms.hosts.copilot import PROCESS_NAMES as HOST_NAMES
from spool_writer.peek import nothing_new

SESSION_START = "sessionStart"
PROMPT = "userPromptSubmitted"
POST_TOOL = "postToolUse"
STOP = "agentStop"
EVENTS = (SESSION_START, PROMPT, POST_TOOL, STOP)
LOG_NAME = "copilot-hook.log"
HOME_ENV = "COPILOT_HOME"
# Below the 10,240 characters Copilot keeps of a postToolUse context, leaving room for the
# line it puts in front.
POST_TOOL_LIMIT = 10_000
# The longest prompt context and stop reason seen to reach the model whole (200,000 and 70,000
# characters); past it nobody has checked, so a longer message earns only `written`.
WHOLE_LIMIT = 70_000
# Where Copilot puts a hook's text with more standing than a peer's (measured on 1.0.102: the
# prompt's context goes into a <system_reminder> in the user's message; a tool hook's is tool
# output and a stop reason a plain prompt), the frame names it.
CHANNELS = {PROMPT: "a system reminder added to your user's prompt"}
CATCH_UP_S = 1.0  # the longest a hook with batches to judge waits for Copilot's event log


def parse_payload(raw: str) -> tuple[str, str | None, str | None, float | None]:
    """The session id, cwd, transcript path and event time (epoch seconds; None if absent) of a
    payload; ValueError if it is not one."""
    data = json.loads(raw)
    if not isinstance(data, dict):
        raise ValueError("hook payload is not a JSON object")
    sid = data.get("sessionId")
    if not isinstance(sid, str) or not sid:
        raise ValueError("hook payload lacks sessionId")
    cwd, transcript, at = data.get("cwd"), data.get("transcriptPath"), data.get("timestamp")
    return (sid, cwd if isinstance(cwd, str) and cwd else None,
            transcript if isinstance(transcript, str) and transcript else None,
            at / 1000 if isinstance(at, int | float) and not isinstance(at, bool) else None)


def log_caught_up(mtime: float | None, event_at: float) -> bool:
    """Whether the event log has been written since this hook's event: Copilot writes it in
    order, so then everything before the event (a killed hook's failed end) is in it."""
    return mtime is not None and mtime >= event_at


def await_log(transcript: str, event_at: float | None, limit: float = CATCH_UP_S) -> None:
    """Give Copilot's event log up to `limit` seconds to catch up with this hook's event.

    Copilot writes the log some 100 ms behind events; judged before that, a batch whose hook
    was killed looks as if Copilot had not moved on yet, and waits for a later hook.
    """
    import time

    if event_at is None:
        return
    deadline = time.monotonic() + limit
    while True:
        try:
            mtime: float | None = os.stat(transcript).st_mtime
        except OSError:
            mtime = None
        if log_caught_up(mtime, event_at) or time.monotonic() >= deadline:
            return
        time.sleep(0.01)


def transcript_path(sid: str, given: str | None, env: dict[str, str]) -> str:
    """The session's event log: the payload's (agentStop has it), else where Copilot keeps it."""
    if given:
        return given
    home = env.get(HOME_ENV) or os.path.join(env.get("HOME") or os.path.expanduser("~"), ".copilot")
    return os.path.join(home, "session-state", sid, "events.jsonl")


def unseen_batches(sessions_dir: Any, sid: str, transcript: str) -> bool:
    """Whether a batch some hook took is not (yet) in the event log: only then is the log's
    lag worth waiting for. A hint read without the cursor's lock; `handover.take` decides."""
    from pathlib import Path

    from alarms import handover

    path = Path(handover.pending_file(str(sessions_dir), sid))
    if not path.exists():
        return False
    held = [b for b in handover.load(path) if not b.released()]
    if not held:
        return False
    seen = handover.look(held, transcript)
    return seen is None or any(not set(b.ids) <= s.found for b, s in zip(held, seen, strict=True))


def output_for(event: str, text: str | None) -> dict[str, Any]:
    """What Copilot is to read for `event` when `text` (framed mail) waits, or None does."""
    if text is None:
        return {}
    if event == STOP:
        return {"decision": "block", "reason": text}
    if event in (PROMPT, POST_TOOL):
        return {"additionalContext": text}
    return {}


def handle(event: str, raw: str, env: dict[str, str]) -> dict[str, Any]:
    """Register if due, take the session's new mail, and say what Copilot should do with it."""
    if event not in EVENTS:
        return {}
    sid, _, given, event_at = parse_payload(raw)
    fast = fast_identity(env)
    if event != SESSION_START and fast is not None and nothing_new(fast, sid):
        return {}
    from alarms import handover
    from alarms.framing import frame
    from alarms.mailbox import SessionMail, host_pid, identity_folder

    mail = SessionMail(identity_folder(env), sid)
    if event == SESSION_START or not mail.registered():
        mail.register(HOST, host_pid(HOST_NAMES))  # again on resume: the pid may be new
    if event == SESSION_START:
        return {}
    transcript = transcript_path(sid, given, env)
    if unseen_batches(mail.layout.sessions_dir, sid, transcript):
        await_log(transcript, event_at)  # batches to judge: against the log as of this event
    records = handover.take(mail.layout, mail.sid, transcript, record=True, fit=fit_for(event))
    return output_for(event, frame(records, channel=CHANNELS.get(event)) if records else None)


def fit_for(event: str) -> Any:
    """postToolUse: what fits whole, the rest left for the stop; the others: everything."""
    from alarms.hook_fit import fit_within
    from durable.receipt_states import Receipt

    if event == POST_TOOL:
        return fit_within(POST_TOOL_LIMIT)
    return fit_within(WHOLE_LIMIT, Receipt.WRITTEN, CHANNELS.get(event))


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    env = env_from_args(args, dict(os.environ))
    return answer(lambda: handle(args[0] if args else "", sys.stdin.read(), env), env, LOG_NAME)


if __name__ == "__main__":
    sys.exit(main())
