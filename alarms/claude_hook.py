"""Claude Code hook: register the session, and hand on mail the monitor has not.

SessionStart only registers: context added there starts no turn, so waiting mail is left for
the monitor, which does start one. UserPromptSubmit adds waiting mail to the turn the user is
starting; Stop blocks the stop with the mail as the reason, which makes Claude Code run one
more turn. The cursor moves before the reply is printed, so a Stop hook never sees the same
mail twice and cannot loop. A hook that dies between the two would lose the mail, so the batch
is first recorded as pending, and UserPromptSubmit and Stop check earlier batches (the
monitor's too) against the payload's `transcript_path` before taking new mail: missing there
after Claude Code moved on, they are handed on again (`alarms.pending`).

Runs on every turn: standard library, `alarms` and `spool_writer` only. A hook that fails
prints `{}` and its reason on stderr, so a broken mailbox never breaks the agent's turn.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

from alarms import pending
from alarms.claude_session import HOST, claude_pid, session_id
from alarms.framing import frame
from alarms.mailbox import SessionMail, identity_folder
from spool_writer.record import SpoolRecord

TAKES_MAIL = frozenset({"UserPromptSubmit", "Stop"})


def parse_payload(raw: str) -> dict[str, Any]:
    try:
        payload = json.loads(raw) if raw.strip() else {}
    except ValueError:
        return {}
    return payload if isinstance(payload, dict) else {}


def reply(event: str, records: list[SpoolRecord]) -> dict[str, Any]:
    """What the hook prints for `event` when `records` were taken for the session."""
    if not records:
        return {}
    if event == "Stop":
        return {"decision": "block", "reason": frame(records)}
    return {"hookSpecificOutput": {"hookEventName": event, "additionalContext": frame(records)}}


def transcript_of(payload: dict[str, Any]) -> str | None:
    path = payload.get("transcript_path")
    return path if isinstance(path, str) and path else None


def handle(event: str, sid: str, transcript: str | None = None) -> list[SpoolRecord]:
    """Register the session if needed and take its mail when `event` delivers mail."""
    mail = SessionMail(identity_folder(), sid)
    if event == "SessionStart" or not mail.registered():
        mail.register(HOST, claude_pid(os.environ))  # again on resume: the pid may be new
    if event not in TAKES_MAIL:
        return []
    return pending.take(mail.layout, mail.sid, transcript, record=transcript is not None)


def main() -> int:
    payload = parse_payload(sys.stdin.read())
    event = str(payload.get("hook_event_name", ""))
    sid = session_id(payload.get("session_id") or None, os.environ)
    records: list[SpoolRecord] = []
    if sid is not None:
        try:
            records = handle(event, sid, transcript_of(payload))
        except Exception as exc:  # the agent's turn must go on whatever the mailbox says
            sys.stderr.write(f"talk: no mail check in this turn: {exc}\n")
    sys.stdout.write(json.dumps(reply(event, records), ensure_ascii=False) + "\n")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
