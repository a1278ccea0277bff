"""Claude Code monitor: one stdout line per peer message, as it reaches the session's spool.

Claude Code turns each line a plugin monitor prints into an event that starts a turn, even in
an idle session. The monitor registers its session (host `claude`, pid of the Claude Code
process), prints the waiting mail, then polls the session's cursor every 200 ms until the
Claude Code process ends.

At most once, by design: the shared cursor moves before a line is printed, so a monitor killed
between the two loses that line for this session (a window of microseconds) rather than
letting the monitor and the Stop hook both deliver it.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from typing import Any

from alarms.claude_session import HOST, claude_pid, session_id
from alarms.framing import one_line
from alarms.mailbox import NoIdentity, SessionMail, identity_folder
from spool_writer import process

POLL_S = 0.2
RETRY_S = 5.0

Take = Callable[[], list[dict[str, Any]]]
Alive = Callable[[], bool]


def event_line(record: dict[str, Any]) -> str:
    """The record as exactly one line: a stray newline would split it into two events."""
    return one_line(record).replace("\r", " ").replace("\n", " ")


def watch(take: Take, alive: Alive, emit: Callable[[str], None], poll: float = POLL_S) -> None:
    """Emit a line per new message until `alive` says the session has ended."""
    while alive():
        for record in take():
            emit(event_line(record))
        time.sleep(poll)


def connect(sid: str, pid: int, alive: Alive) -> SessionMail | None:
    """The registered session, retried while no identity exists yet; None if the host ended."""
    told = False
    while alive():
        try:
            mail = SessionMail(identity_folder(), sid)
            mail.register(HOST, pid)
            return mail
        except NoIdentity as exc:
            if not told:
                say(f"{exc}; waiting for `talk init` (retrying every {RETRY_S:g} s)")
                told = True
        time.sleep(RETRY_S)
    return None


def say(message: str) -> None:
    sys.stderr.write(f"talk monitor: {message}\n")
    sys.stderr.flush()


def emit_stdout(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def idle(alive: Alive) -> None:
    while alive():
        time.sleep(RETRY_S)


def main(argv: list[str]) -> int:
    pid = claude_pid(os.environ)
    start = process.start_time(pid)

    def alive() -> bool:
        return process.alive(pid, start)

    sid = session_id(argv[0] if argv else None, os.environ)
    if sid is None:
        say("no Claude Code session id; not watching for mail in this session")
        idle(alive)
        return 0
    try:
        mail = connect(sid, pid, alive)
        if mail is not None:
            watch(mail.take, alive, emit_stdout)
    except BrokenPipeError:  # Claude Code closed our stdout: the session is over
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no noise at exit
    except Exception as exc:  # say why on stderr, then stay out of the way
        say(f"stopped: {exc}")
        idle(alive)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
