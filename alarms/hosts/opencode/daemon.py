"""The opencode door: a daemon that turns a session's new mail into opencode turns, exactly once.

    python -m alarms.opencode --folder IDENTITY_DIR --url http://127.0.0.1:4096 [--session ID] [--pid PID]

`talk door opencode` starts it detached (setsid, no terminal). It finds the opencode session
(or creates one titled "talk"), registers it with talk as host `opencode` with the session id
as sid, then every `POLL_S` moves new spool mail into its outbox and posts it at once to
`POST /session/{id}/prompt_async`: one framed block per batch. Into an idle session the post
starts a run; into a busy one (opencode 1.18.33) it joins the running loop, which reads the
session's messages again before each model request, so the mail is in the next request: after
the current tool call or streamed reply, within the same run.

While the session has a permission or question open for its person (on the event stream),
nothing is posted: the mail stays where it is, and the answer wakes the door.

It follows the session's busy/idle state on opencode's event stream (`alarms.hosts.opencode.events`;
it polls `GET /session/status` while the stream is down) to close the one gap in that: a
message stored as a run winds down is left unanswered. Each accepted batch waits in the outbox
until the session, idle again, shows it taken into a run, and is posted again if not
(`alarms.hosts.opencode.verdict`).

Which pid the session is registered with: the `--pid` given while it runs, else the process
listening on the URL's port (the opencode server), else the door's own. A session lives as
long as that process, so while the opencode server is gone new mail waits in the inbox (where
any other session may take it) instead of piling up here; when the server is back (a new pid)
the door registers again and takes the inbox over. With its own pid (a server it cannot see,
e.g. another machine's) the session lives as long as the door.

The door follows one URL and one session. opencode keeps sessions under its HOME, so a server
restarted with the same HOME and project, on the same port, is found again; one that comes
back on another port needs `talk door opencode --url NEW --session SID`. A session opencode
no longer knows (404) is reported in the status and its mail is kept, never dropped.

It hands mail only to the user's own opencode: each connection's other end must belong to the
user (`alarms.hosts.opencode.trust`); while another user's listener holds the port, mail is kept and
the status says whose it is.

Its files and status, and how `talk status` shows them: `alarms.hosts.opencode.status`.
Nothing is lost and nothing is shown twice: see `alarms.hosts.opencode.outbox` for why.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import threading
import time
from pathlib import Path

from alarms.door_daemon import serve
from alarms.framing import frame
from alarms.handover import records_by_id
from alarms.hosts.opencode.api import OpencodeClient, OpencodeError, OpencodeRefused, OpencodeUntrusted
from alarms.hosts.opencode.events import EventFollower, Run
from alarms.hosts.opencode.outbox import (
    Prompt,
    PromptOutbox,
    PromptOutboxState,
    accepted,
    new_prompt,
    settled,
)
from alarms.hosts.opencode.status import HOST, DoorState, SessionDoorFiles, SessionDoorStatus, start_log
from alarms.hosts.opencode.verdict import WINDOW, PromptVerdict, verdict
from alarms.mailbox import SessionMail
from alarms.procnet import pid_listening_on
from durable.backoff import Backoff
from durable.daemon import setup_logging
from durable.receipt_states import Receipt
from spool_writer import handed as handed_log
from spool_writer.record import SpoolRecord

__all__ = ["main", "run"]

POLL_S = 0.1  # reading an unchanged spool costs a stat and a lock: cheap, and mail lands within 2 s
RETRY = Backoff(base_s=0.25, cap_s=5.0)  # a local server: probing it is cheap, and mail should not wait long
LOOPBACK = ("127.0.0.1", "localhost", "::1")
# A post is judged once the session went idle after it, or, without that sign (the event stream
# down, or a post opencode never stored into an idle session), once the session is idle this
# long after it. Not less: a fresh opencode instance can take seconds between storing the first
# message and starting its run. Judging early costs only a needless repost (the same upsert).
# Each repost of the same prompt doubles the wait, so a prompt opencode keeps dropping is not a
# hot loop.
SETTLE_S = 5.0
STATUS_POLL_S = 1.0  # how often `GET /session/status` is read while the event stream is down

log = logging.getLogger("talk.alarm.opencode")


def choose_pid(given: int | None, given_alive: bool, server: int | None, own: int) -> int:
    """The pid to register the session with (see the module docstring for why this order)."""
    if given is not None and given_alive:
        return given
    return server if server is not None else own


def is_loopback(host: str) -> bool:
    return host in LOOPBACK or host.startswith("127.")


def due(idle: bool, idles_now: int, post: tuple[float, int, int] | None, now: float) -> bool:
    """Whether a posted prompt is judged now. `post`: (when posted, idles counted just before,
    reposts so far), None when it was posted before this process started."""
    if not idle:
        return False
    if post is None:
        return True
    at, idles_before, reposts = post
    return idles_now > idles_before or now - at >= SETTLE_S * 2 ** min(reposts, 5)


# --- the daemon -----------------------------------------------------------------------------


class OpencodeDoor:
    """One session's delivery loop; `step` does one round and says how long to sleep."""

    def __init__(self, folder: Path, client: OpencodeClient, sid: str, given_pid: int | None) -> None:
        from spool_writer.cursor import CursorReader

        self.files = SessionDoorFiles(folder, sid)
        self.client = client
        self.sid = sid
        self.given_pid = given_pid
        self.mail = SessionMail(folder, sid)
        # No receipt when the cursor moves: mail in the outbox has reached nothing yet. A batch
        # earns `written` when opencode accepts the post and `delivered` once opencode shows it
        # stored and taken into a run (`_receipt`).
        self.reader = CursorReader(self.mail.layout.session_file(sid), self.mail.layout.cursor_file(sid))
        self.outbox = PromptOutbox(self.files.outbox)
        self.registered: tuple[int, int | None] | None = None  # (pid, start time)
        self.failures = 0
        self.status = SessionDoorStatus(pid=os.getpid(), url=client.url, session=sid, since=time.time())
        self.stop = threading.Event()
        self.wake = threading.Event()  # set on stop and on every change of the session's state
        self.events = EventFollower(client, sid, self.wake, self.stop)
        self.posts: dict[str, tuple[float, int, int]] = {}  # message id -> (at, idles before, reposts)
        self.polled: tuple[float, bool] = (0.0, False)  # (when, idle) of the last status poll

    def run(self) -> None:
        self._save_status()
        log.info("alarm for opencode session %s at %s (pid %d)", self.sid, self.client.url, os.getpid())
        state = self.outbox.load()
        if state.pending is not None:
            log.info("retrying %d message(s) left in the outbox as %s", len(state.pending.ids),
                     state.pending.message_id)
        if state.posted:
            log.info("%d posted batch(es) to check once the session is idle", len(state.posted))
        self.events.start()
        while not self.stop.is_set():
            delay = self.step()
            if delay > 0:
                self.wake.wait(delay)
            self.wake.clear()
        self.status.state = DoorState.STOPPED.value
        self._save_status()
        log.info("stopped")

    def halt(self) -> None:
        self.stop.set()
        self.wake.set()

    def step(self) -> float:
        from durable.errors import TalkError

        try:
            if not self._session_live():
                self._register()
            if self.events.activity.asking:  # the person is answering opencode: mail waits in the spool
                self._note_run()
                return POLL_S
            state = self.outbox.load()
            if state.pending is None:
                state = self.outbox.fill(self.reader, self._batch)
            if state.pending is not None:
                self._deliver(state)
                return 0.0  # more mail may be waiting
            self._note_run()
            if state.posted:
                self._judge(state)
            return POLL_S
        except (OpencodeError, TalkError, OSError) as exc:
            return self._failed(exc)

    def _batch(self, records: list[SpoolRecord]) -> Prompt:
        return new_prompt(records, frame(records), int(time.time() * 1000))

    def _deliver(self, state: PromptOutboxState) -> None:
        assert state.pending is not None
        self._post(state.pending, 0)
        self.outbox.save(accepted(state))
        self._receipt(state.pending, Receipt.WRITTEN)
        n = len(state.pending.ids)
        log.info("delivered %d message(s) as %s (session %s): %s", n, state.pending.message_id,
                 self.events.activity.run, ", ".join(state.pending.ids))
        self.failures = 0
        self.status.delivered += n
        self.status.last_delivery = time.time()
        self.status.state = DoorState.DELIVERING.value
        self._save_status()

    def _post(self, prompt: Prompt, reposts: int) -> None:
        idles = self.events.activity.idles  # before the post: an idle it causes must count
        self.client.prompt_async(self.sid, prompt.body())
        self.posts[prompt.message_id] = (time.monotonic(), idles, reposts)

    def _receipt(self, prompt: Prompt, state: Receipt) -> None:
        """Record the receipt `prompt`'s messages earned in the hand-over log the follower reads.
        A crash before this line costs a receipt, never mail: a taken batch is judged again."""
        layout = self.mail.layout
        handed_log.record(layout.handed, records_by_id(layout.session_file(self.sid), prompt.ids),
                          self.sid, state)

    def _idle(self) -> bool:
        """Whether the session is idle now: from the event stream, else from a status poll."""
        activity = self.events.activity
        if activity.following:
            return activity.run == Run.IDLE
        at, idle = self.polled
        if time.monotonic() - at >= STATUS_POLL_S:
            self.polled = (time.monotonic(), idle := not self.client.busy(self.sid))
        return idle

    def _judge(self, state: PromptOutboxState) -> None:
        """Settle each posted prompt the idle session shows taken; post the others again."""
        idles, now = self.events.activity.idles, time.monotonic()
        ready = [p for p in state.posted if due(self._idle(), idles, self.posts.get(p.message_id), now)]
        if not ready:
            return
        newest = self.client.newest_messages(self.sid, WINDOW)
        for prompt in ready:
            found = verdict(prompt.message_id, self.client.stored(self.sid, prompt.message_id), newest)
            if found == PromptVerdict.TAKEN:
                state = settled(state, prompt.message_id)
                self.posts.pop(prompt.message_id, None)
                self._receipt(prompt, Receipt.DELIVERED)
                self.status.taken += len(prompt.ids)
                log.info("opencode took %s into a run", prompt.message_id)
                continue
            reposts = self.posts.get(prompt.message_id, (0.0, 0, 0))[2] + 1
            log.log(logging.INFO if reposts == 1 else logging.WARNING,
                    "%s is %s in the idle session; posting it again (try %d)",
                    prompt.message_id, found, reposts)
            self._post(prompt, reposts)
        self.outbox.save(state)
        self._save_status()

    def _note_run(self) -> None:
        activity = self.events.activity
        run = activity.run.value if activity.following else Run.UNKNOWN.value
        if (run, activity.following) != (self.status.run, self.status.events):
            self.status.run, self.status.events = run, activity.following
            self._save_status()

    def _failed(self, exc: Exception) -> float:
        self.failures += 1
        wait = RETRY.delay(self.failures)
        if self.failures == 1 or self.failures % 10 == 0:
            log.warning("%s; mail is kept, next try in %.1f s (failure %d)", exc, wait, self.failures)
        self.status.last_error = _advice(exc, self.sid)
        self.status.last_error_at = time.time()
        self.status.state = DoorState.WAITING.value
        self._save_status()
        return wait

    def _session_live(self) -> bool:
        from spool_writer.process import alive

        if self.registered is None or not self.mail.registered():
            return False
        return alive(*self.registered)

    def _register(self) -> None:
        """(Re)register once opencode answers: its server has a pid again, and the inbox is ours."""
        from spool_writer.process import alive, start_time

        if not self.client.session_exists(self.sid):
            raise OpencodeRefused(f"opencode at {self.client.url} has no session {self.sid}", 404)
        given_alive = self.given_pid is not None and alive(self.given_pid, None)
        server = pid_listening_on(self.client.port) if is_loopback(self.client.host) else None
        pid = choose_pid(self.given_pid, given_alive, server, os.getpid())
        took = self.mail.register(HOST, pid)
        self.registered = (pid, start_time(pid))
        self.status.host_pid = pid
        self.status.state = DoorState.DELIVERING.value
        self._save_status()
        log.info("registered session %s with pid %d%s", self.sid, pid,
                 f"; took over {took} inbox message(s)" if took else "")

    def _save_status(self) -> None:
        self.status.save(self.files.status)


def _advice(exc: Exception, sid: str) -> str:
    if isinstance(exc, OpencodeRefused) and exc.status == 404:
        return (f"{exc}; mail is kept. Restart opencode with the same HOME and project, or stop this "
                f"alarm (`talk door stop opencode --session {sid}`) and start one for a live session")
    if isinstance(exc, OpencodeUntrusted):
        return f"{exc}; mail is kept until your own opencode listens there"
    return f"{exc}; mail is kept and delivered when opencode answers"


def find_or_create_session(client: OpencodeClient, sid: str | None) -> str:
    """The given session id (opencode may be down: it is checked when it answers), or a new one."""
    return sid if sid else client.create_session()


def run(folder: Path, url: str, sid: str | None, pid: int | None, foreground: bool = False) -> int:
    """Run the door until SIGTERM/SIGINT; 0 also when another door already serves the session."""
    client = OpencodeClient(url)
    if sid is None:
        try:
            sid = find_or_create_session(client, None)
        except OpencodeError as exc:
            setup_logging(start_log(folder), foreground)
            log.error("cannot create an opencode session: %s; is `opencode serve` running at %s?", exc, url)
            return 1
    from spool_writer.layout import check_sid

    files = SessionDoorFiles(folder, check_sid(sid))
    setup_logging(files.log, foreground)
    return serve(files, lambda: OpencodeDoor(folder, client, sid, pid), log,
                 f"another door already serves session {sid}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m alarms.opencode")
    parser.add_argument("--folder", required=True, type=Path, help="the talk identity folder")
    parser.add_argument("--url", required=True, help="the opencode server, e.g. http://127.0.0.1:4096")
    parser.add_argument("--session", help="opencode session id (default: create one titled 'talk')")
    parser.add_argument("--pid", type=int, help="pid the session lives with (default: the server's)")
    parser.add_argument("--foreground", action="store_true", help="also log to stderr")
    args = parser.parse_args(argv)
    sys.exit(run(args.folder, args.url, args.session, args.pid, args.foreground))


if __name__ == "__main__":
    main()
