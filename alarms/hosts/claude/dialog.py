"""Whether a Claude Code session waits on its person (a permission prompt, a dialog): then the
inbox doors hold the mail.

What a frame written to the inbox does to an open permission prompt, measured on Claude Code
2.1.332: one with priority `now` cancels it (the tool call comes back refused, the peer's text in
its place; anthropics/claude-code#93720); talk's `next` frame leaves it up, but draws the peer's
text over the question the person is reading, queued to run the moment they answer. So while
the session waits on its person, a door writes nothing: the batch stays in the spool with the
cursor unmoved, and the first poll after the answer hands it on. After Yes it joins the running
turn; after No or Esc the session is idle and the mail starts a turn, which Claude Code sends to
the model behind the refusal.

Claude Code keeps that state in the session's registry record (`session.read_record`): `status`
is `busy`, `idle` or `waiting`, and `waitingFor` names what is open ("permission prompt",
"dialog open", "input needed", ...). `claude agents --json` lists the same fields of the same
records and is the documented way to read them, but each call starts Claude Code's 400 MB
binary: 0.5 to 1.1 s, 0.3 s of CPU and 130 MB on a busy two-core machine, against 40 to 80 us
for reading the record, which the monitor can afford on every 200 ms poll. A record without a
status (older versions, messaging off) holds nothing.

`waiting_on` decides from the record; `waiting` is the read.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping

from alarms.hosts.claude.session import read_record


class Status(enum.Enum):
    BUSY = "busy"
    IDLE = "idle"
    WAITING = "waiting"  # on the person: a prompt or dialog is open


UNNAMED = "a dialog"


def waiting_on(record: Mapping[str, object] | None) -> str | None:
    """What the session waits on its person for (e.g. "permission prompt"), or None when mail
    may be written: busy, idle, or no status known."""
    if not record or record.get("status") != Status.WAITING.value:
        return None
    what = record.get("waitingFor")
    return what if isinstance(what, str) and what else UNNAMED


def waiting(env: Mapping[str, str], pid: int) -> str | None:
    """`waiting_on` for the Claude Code process `pid`, read from its registry record now."""
    return waiting_on(read_record(env, pid))
