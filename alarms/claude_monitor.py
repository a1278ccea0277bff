"""Claude Code monitor: one stdout line per peer message, as it reaches the session's spool.

Claude Code turns each line a plugin monitor prints into an event that starts a turn, even in
an idle session. The monitor registers its session (host `claude`, pid of the Claude Code
process), prints the waiting mail, then polls the session's cursor every 200 ms until the
Claude Code process ends.

The shared cursor moves before a line is printed, so the monitor and the Stop hook never both
deliver a message. A monitor killed between the two would lose the line, so each batch is
first recorded as pending (`alarms.pending`): Claude Code writes every monitor line it receives
into the session's transcript, and the hooks' next run (or a restarted monitor) hands on again
whatever a dead monitor took but the transcript never got. The monitor reconciles at start and
then every RECONCILE_S while something is pending, which also forgets its own delivered lines.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

from alarms import pending
from alarms.claude_session import HOST, claude_pid, session_id, transcript_path
from alarms.framing import one_line
from alarms.mailbox import NoIdentity, SessionMail, identity_folder
from spool_writer import process
from spool_writer.record import SpoolRecord

POLL_S = 0.2
RETRY_S = 5.0
RECONCILE_S = 5.0  # reading the transcript costs more than a poll: not on every one

Take = Callable[[], list[SpoolRecord]]
Alive = Callable[[], bool]


def event_line(record: SpoolRecord) -> str:
    """The record as exactly one line: a stray newline would split it into two events."""
    return one_line(record).replace("\r", " ").replace("\n", " ")


def watch(take: Take, alive: Alive, emit: Callable[[str], None], poll: float = POLL_S) -> None:
    """Emit a line per new message until `alive` says the session has ended."""
    while alive():
        for record in take():
            emit(event_line(record))
        time.sleep(poll)


def reconcile_due(last: float | None, now: float, pending_exists: bool, every: float = RECONCILE_S) -> bool:
    """At start always; later only while a batch is pending, and at most every `every` s."""
    return last is None or (pending_exists and now - last >= every)


class Taker:
    """The monitor's `take`: new mail, each batch recorded as pending before it is printed."""

    def __init__(self, mail: SessionMail, env: dict[str, str]) -> None:
        self.mail, self.env = mail, env
        self.transcript: str | None = None
        self.last: float | None = None
        self.pending = Path(pending.pending_file(str(mail.layout.sessions_dir), mail.sid))

    def __call__(self) -> list[SpoolRecord]:
        now = time.monotonic()
        due = reconcile_due(self.last, now, self.pending.exists())
        if due:
            self.last = now
            # The transcript appears with the first message; until then nothing can be judged.
            self.transcript = self.transcript or transcript_path(self.mail.sid, self.env)
        return pending.take(self.mail.layout, self.mail.sid, self.transcript, record=True,
                            reconcile=due and self.transcript is not None)


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
            watch(Taker(mail, dict(os.environ)), alive, emit_stdout)
    except BrokenPipeError:  # Claude Code closed our stdout: the session is over
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no noise at exit
    except Exception as exc:  # say why on stderr, then stay out of the way
        say(f"stopped: {exc}")
        idle(alive)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
