"""Claude Code monitor: hands each peer message to its session as it reaches the session's spool.

Where the session has an inbox socket (Claude Code 2.1.224 and later, messaging on), the monitor
writes each batch there (`alarms.hosts.claude.inbox`): Claude Code shows it whole to the model between
tool calls of a running turn, or starts a turn with it when idle. A monitor is a child of the
session, so Claude Code takes its frames as the session's own.

Without one, it prints one short notice line per arrival and nothing of the message: Claude Code
turns each stdout line of a monitor into an event that starts a turn, but trims the event to
about 500 characters, which would cut a message and the footer that marks it as a peer's. The
turn the notice starts ends in the Stop hook, which hands the mail over whole (`alarms.hosts.claude.hook`).

It registers its session (host `claude`, pid of the Claude Code process), then polls every 200 ms
until that process ends. The shared cursor moves before a batch is written, and the batch is
first recorded as pending (`alarms.handover`), held by the Claude Code process: the transcript
entry with the frame's id confirms it (the sender's `delivered` receipt), and if the session
ends without it, the next run of a hook or monitor for the session hands it on again. The
monitor reconciles at start and then every RECONCILE_S while something is pending.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

from alarms import handover, mailbox
from alarms.door_stdio import emit_stdout, teller
from alarms.hosts.claude import NAME as HOST
from alarms.hosts.claude.dialog import waiting
from alarms.hosts.claude.inbox import DoorError, InboxDoor, find_door, hand_on
from alarms.hosts.claude.session import claude_pid, session_id, transcript_path
from alarms.mailbox import SessionMail
from spool_writer import process

POLL_S = 0.2
RETRY_S = 5.0
RECONCILE_S = 1.0  # reading the transcript costs more than a poll: not on every one

Alive = Callable[[], bool]
Emit = Callable[[str], None]


def notice(waiting: int) -> str:
    """The line that starts a turn when mail waits: no name, no id, no text of the peer's."""
    many = f"{waiting} new peer messages are" if waiting != 1 else "a new peer message is"
    return (f"[talk] {many} waiting. It is handed to you whole when this turn ends; "
            "nothing to do until then.")


def reconcile_due(last: float | None, now: float, pending_exists: bool, every: float = RECONCILE_S) -> bool:
    """At start always; later only while a batch is pending, and at most every `every` s."""
    return last is None or (pending_exists and now - last >= every)


class InboxWriter:
    """One poll with an inbox: new mail written to the socket, pending until the transcript has it."""

    def __init__(self, mail: SessionMail, door: InboxDoor, host: int, env: dict[str, str]) -> None:
        self.mail, self.door, self.host, self.env = mail, door, host, env
        self.transcript: str | None = None
        self.last: float | None = None
        self.pending = Path(handover.pending_file(str(mail.layout.sessions_dir), mail.sid))

    def __call__(self) -> None:
        if waiting(self.env, self.host) is not None:  # routine, so said nowhere
            return
        now = time.monotonic()
        due = reconcile_due(self.last, now, self.pending.exists())
        if due:
            self.last = now
            # The transcript appears with the first turn; until then nothing can be judged.
            self.transcript = self.transcript or transcript_path(self.mail.sid, self.env)
        hand_on(self.mail.layout, self.mail.sid, self.door, self.host, self.transcript,
                reconcile=due and self.transcript is not None)


class Notifier:
    """One poll without an inbox: a notice when more mail waits than at the last poll."""

    def __init__(self, mail: SessionMail, emit: Emit) -> None:
        self.mail, self.emit, self.seen = mail, emit, 0

    def __call__(self) -> None:
        waiting = self.mail.waiting()
        if waiting > self.seen:
            self.emit(notice(waiting))
        self.seen = waiting


def watch(mail: SessionMail, door: InboxDoor | None, host: int, alive: Alive, emit: Emit,
          poll: float = POLL_S) -> None:
    """Hand mail on until `alive` says the session has ended; notices only, once the inbox fails."""
    step: Callable[[], None] = (InboxWriter(mail, door, host, dict(os.environ)) if door is not None
                                else Notifier(mail, emit))
    while alive():
        try:
            step()
        except DoorError as exc:  # the batch is released: the Stop hook hands it over
            say(f"{exc}; from now on only notices, and the hooks hand the mail over")
            step = Notifier(mail, emit)
        time.sleep(poll)


def connect(sid: str, pid: int, alive: Alive) -> SessionMail | None:
    """The registered session, retried while no identity exists yet; None if the host ended."""
    return mailbox.connect(sid, HOST, pid, alive, say, RETRY_S)


say = teller("monitor")


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
            watch(mail, find_door(os.environ, pid), pid, alive, emit_stdout)
    except BrokenPipeError:  # Claude Code closed our stdout: the session is over
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no noise at exit
    except Exception as exc:  # say why on stderr, then stay out of the way
        say(f"stopped: {exc}")
        idle(alive)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
