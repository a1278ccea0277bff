"""The Gemini CLI door: one hook command for SessionStart, BeforeAgent, AfterTool and AfterAgent.

Gemini CLI runs it (through `bash -c`) with the hook payload (JSON) on stdin and reads one JSON
object from stdout:

    SessionStart    registers the session (host: the Gemini CLI process that runs the hook);
    BeforeAgent     hands waiting mail on as context added to the prompt:
    AfterTool       {"hookSpecificOutput": {"hookEventName": EVENT, "additionalContext": TEXT}}
                    (after a tool call, appended to the tool's result: mail reaches the model in
                    the middle of a turn)
    AfterAgent      with mail waiting, {"decision": "block", "reason": TEXT}: Gemini CLI sends
                    TEXT as a new prompt, one more turn; with none, {} lets the turn end.

Nothing wakes an idle Gemini CLI session from outside: mail that arrives while it waits for its
user is handed on with the next prompt.

Measured on Gemini CLI 0.61.0: BeforeAgent's context and AfterAgent's reason reach the model
whole (a 64 KB message too), so they earn `delivered`. AfterTool's context is appended to the
tool's result, which Gemini CLI cuts to its first 8,000 and last 32,000 characters once the
whole exceeds `tools.truncateToolOutputThreshold` (40,000 by default); so AfterTool takes only
the messages that fit with the tool's own output under TOOL_LIMIT, and leaves the rest for
AfterAgent.

Exactly once: mail is taken through the session's cursor as `alarms.handover` records it, and
each run reconciles earlier batches against the payload's `transcript_path` (Gemini CLI's
session JSONL, which it appends every prompt and tool result to as it sends them). The fast
path, the error log and the argument handling are every hook door's (`alarms.hook_runtime`).

Meant to be run as `PYTHON -I -S .../alarms/gemini_hook.py` (see `talk install gemini`), which
finds `alarms` and runs `main` here.
"""

from __future__ import annotations

import json
import os
import sys

from alarms.hosts.gemini import NAME as HOST
from alarms.hosts.gemini import PROCESS_NAMES

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: this runs on every turn
if TYPE_CHECKING:
    from pathlib import Path
    from typing import Any

    from alarms.handover import Fit

__all__ = ["main"]

SESSION_START = "SessionStart"
BEFORE_AGENT = "BeforeAgent"
AFTER_TOOL = "AfterTool"
AFTER_AGENT = "AfterAgent"
EVENTS = (SESSION_START, BEFORE_AGENT, AFTER_TOOL, AFTER_AGENT)
TAKES_MAIL = (BEFORE_AGENT, AFTER_TOOL, AFTER_AGENT)
LOG_NAME = "gemini-hook.log"
# Gemini CLI's default truncation threshold for a tool's result (which carries AfterTool's
# context) is 40,000 characters; this leaves room for what it wraps around both.
TOOL_LIMIT = 36_000


def output_for(event: str, text: str | None) -> dict[str, Any]:
    """What Gemini CLI is to read for `event` when `text` (framed mail) waits, or None does."""
    if text is None:
        return {}
    if event == AFTER_AGENT:
        return {"decision": "block", "reason": text}
    if event in (BEFORE_AGENT, AFTER_TOOL):
        return {"hookSpecificOutput": {"hookEventName": event, "additionalContext": text}}
    return {}


def tool_output_size(payload: dict[str, Any]) -> int:
    """How many characters of the tool's own result AfterTool's context is appended to."""
    response = payload.get("tool_response")
    content = response.get("llmContent") if isinstance(response, dict) else response
    if content is None:
        return 0
    return len(content) if isinstance(content, str) else len(json.dumps(content, ensure_ascii=False))


def fitter(event: str, tool_output: int) -> Fit | None:
    """AfterTool: the waiting messages that fit whole beside the tool's output (the rest waits
    for AfterAgent, which shows any length); other events take everything."""
    if event != AFTER_TOOL:
        return None
    from alarms.framing import frame
    from durable.receipt_states import Receipt

    room = TOOL_LIMIT - tool_output

    def fit(records: list[Any]) -> tuple[int, Receipt | None]:
        n = len(records)
        while n and len(frame(records[:n])) > room:
            n -= 1
        return n, (Receipt.DELIVERED if n else None)
    return fit


def is_gemini(argv: list[str]) -> bool:
    """Whether a command line runs Gemini CLI: `gemini ...`, or `node [flags] .../gemini ...`."""
    if not argv:
        return False
    names = [os.path.basename(a) for a in argv[:4] if a and not a.startswith("-")]
    return bool(names) and (names[0] in PROCESS_NAMES
                            or (names[0].startswith("node") and len(names) > 1 and names[1] in PROCESS_NAMES))


def gemini_pid(start: int | None = None) -> int:
    """The nearest ancestor running Gemini CLI (the hook's parent, as `bash -c` execs a simple
    command), else the parent: a wrong pid ends the session early, which is safe."""
    pid = os.getppid() if start is None else start
    first = pid
    for _ in range(16):
        if pid <= 1:
            break
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                argv = [a.decode(errors="replace") for a in f.read().split(b"\0") if a]
            with open(f"/proc/{pid}/stat") as f:
                stat = f.read()
        except OSError:
            break
        if is_gemini(argv):
            return pid
        pid = int(stat[stat.rindex(")") + 2:].split()[1])
    return first


def handle(raw: str, env: dict[str, str]) -> dict[str, Any]:
    """Register if due, take the session's new mail, and say what Gemini CLI should do with it."""
    from alarms.hook_runtime import fast_identity, parse_hook
    from spool_writer.peek import nothing_new

    event, sid, transcript, _ = parse_hook(raw)
    if event not in EVENTS:
        return {}
    fast = fast_identity(env)
    if event != SESSION_START and fast is not None and nothing_new(fast, sid):
        return {}
    from alarms.mailbox import identity_folder

    payload = json.loads(raw)
    return deliver(identity_folder(env), event, sid, transcript, tool_output_size(payload))


def deliver(folder: Path, event: str, sid: str, transcript: str | None,
            tool_output: int = 0) -> dict[str, Any]:
    """Register when due, then lost batches again (see `alarms.handover`) and new mail, as
    Gemini CLI's answer to `event`."""
    from alarms import handover
    from alarms.hook_runtime import should_register
    from alarms.mailbox import SessionMail
    from spool_writer import registry

    mail = SessionMail(folder, sid)
    record = registry.load(mail.layout).get(sid)
    if should_register(event, record is not None) or record is None or not record.alive():
        mail.register(HOST, gemini_pid())
    if event not in TAKES_MAIL:
        return {}
    records = handover.take(mail.layout, sid, transcript, record=transcript is not None,
                           fit=fitter(event, tool_output))
    if not records:
        return {}
    from alarms.framing import frame

    return output_for(event, frame(records))


def main(argv: list[str] | None = None) -> int:
    from alarms.hook_runtime import answer, env_from_args

    env = env_from_args(sys.argv[1:] if argv is None else argv, dict(os.environ))
    return answer(lambda: handle(sys.stdin.read(), env), env, LOG_NAME)


if __name__ == "__main__":
    sys.exit(main())
