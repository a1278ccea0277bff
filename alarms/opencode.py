"""The opencode alarm: a daemon that turns a session's new mail into opencode turns, exactly once.

    python -m alarms.opencode --folder IDENTITY_DIR --url http://127.0.0.1:4096 [--session ID] [--pid PID]

`talk alarm opencode` starts it detached (setsid, no terminal). It finds the opencode session
(or creates one titled "talk"), registers it with talk as host `opencode` with the session id
as sid, then every `POLL_S` moves new spool mail into its outbox and posts it to
`POST /session/{id}/prompt_async`: one framed block per batch. opencode queues a prompt that
arrives while a turn runs and sends it right after the running step.

Which pid the session is registered with: the `--pid` given while it runs, else the process
listening on the URL's port (the opencode server), else the alarm's own. A session lives as
long as that process, so while the opencode server is gone new mail waits in the inbox (where
any other session may take it) instead of piling up here; when the server is back (a new pid)
the alarm registers again and takes the inbox over. With its own pid (a server it cannot see,
e.g. another machine's) the session lives as long as the alarm.

The alarm follows one URL and one session. opencode keeps sessions under its HOME, so a server
restarted with the same HOME and project, on the same port, is found again; one that comes
back on another port needs `talk alarm opencode --url NEW --session SID`. A session opencode
no longer knows (404) is reported in the status and its mail is kept, never dropped.

Its files and status, and how `talk status` shows them: `alarms.opencode_status`.
Nothing is lost and nothing is shown twice: see `alarms.opencode_outbox` for why.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import threading
import time
from pathlib import Path

from alarms.framing import frame
from alarms.mailbox import SessionMail
from alarms.opencode_api import OpencodeClient, OpencodeError, OpencodeRefused
from alarms.opencode_outbox import Prompt, PromptOutbox, PromptOutboxState, accepted, new_prompt
from alarms.opencode_status import HOST, AlarmFiles, AlarmStatus, State, start_log
from alarms.procnet import pid_listening_on
from durable.backoff import Backoff
from durable.daemon import setup_logging
from durable.locks import hold_for_life
from spool_writer.record import SpoolRecord

POLL_S = 0.1  # reading an unchanged spool costs a stat and a lock: cheap, and mail lands within 2 s
RETRY = Backoff(base_s=0.25, cap_s=5.0)  # a local server: probing it is cheap, and mail should not wait long
LOOPBACK = ("127.0.0.1", "localhost", "::1")

log = logging.getLogger("talk.alarm.opencode")


def choose_pid(given: int | None, given_alive: bool, server: int | None, own: int) -> int:
    """The pid to register the session with (see the module docstring for why this order)."""
    if given is not None and given_alive:
        return given
    return server if server is not None else own


def is_loopback(host: str) -> bool:
    return host in LOOPBACK or host.startswith("127.")


# --- the daemon -----------------------------------------------------------------------------


class OpencodeAlarm:
    """One session's delivery loop; `step` does one round and says how long to sleep."""

    def __init__(self, folder: Path, client: OpencodeClient, sid: str, given_pid: int | None) -> None:
        from spool_writer.cursor import CursorReader

        self.files = AlarmFiles(folder, sid)
        self.client = client
        self.sid = sid
        self.given_pid = given_pid
        self.mail = SessionMail(folder, sid)
        self.reader = CursorReader(self.mail.layout.session_file(sid), self.mail.layout.cursor_file(sid),
                                   handed=self.mail.layout.handed, sid=sid)
        self.outbox = PromptOutbox(self.files.outbox)
        self.registered: tuple[int, int | None] | None = None  # (pid, start time)
        self.failures = 0
        self.status = AlarmStatus(pid=os.getpid(), url=client.url, session=sid, since=time.time())
        self.stop = threading.Event()

    def run(self) -> None:
        self._save_status()
        log.info("alarm for opencode session %s at %s (pid %d)", self.sid, self.client.url, os.getpid())
        pending = self.outbox.load().pending
        if pending is not None:
            log.info("retrying %d message(s) left in the outbox as %s", len(pending.ids), pending.message_id)
        while not self.stop.is_set():
            self.stop.wait(self.step())
        self.status.state = State.STOPPED.value
        self._save_status()
        log.info("stopped")

    def step(self) -> float:
        from durable.errors import TalkError

        try:
            if not self._session_live():
                self._register()
            state = self.outbox.load()
            if state.pending is None:
                state = self.outbox.fill(self.reader, self._batch)
            if state.pending is None:
                return POLL_S
            self._deliver(state)
            return 0.0  # more mail may be waiting
        except (OpencodeError, TalkError, OSError) as exc:
            return self._failed(exc)

    def _batch(self, records: list[SpoolRecord]) -> Prompt:
        return new_prompt(records, frame(records), int(time.time() * 1000))

    def _deliver(self, state: PromptOutboxState) -> None:
        assert state.pending is not None
        self.client.prompt_async(self.sid, state.pending.body())
        self.outbox.save(accepted(state))
        n = len(state.pending.ids)
        log.info("delivered %d message(s) as %s: %s", n, state.pending.message_id,
                 ", ".join(state.pending.ids))
        self.failures = 0
        self.status.delivered += n
        self.status.last_delivery = time.time()
        self.status.state = State.DELIVERING.value
        self._save_status()

    def _failed(self, exc: Exception) -> float:
        self.failures += 1
        wait = RETRY.delay(self.failures)
        if self.failures == 1 or self.failures % 10 == 0:
            log.warning("%s; mail is kept, next try in %.1f s (failure %d)", exc, wait, self.failures)
        self.status.last_error = _advice(exc, self.sid)
        self.status.last_error_at = time.time()
        self.status.state = State.WAITING.value
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
        self.status.state = State.DELIVERING.value
        self._save_status()
        log.info("registered session %s with pid %d%s", self.sid, pid,
                 f"; took over {took} inbox message(s)" if took else "")

    def _save_status(self) -> None:
        self.status.save(self.files.status)


def _advice(exc: Exception, sid: str) -> str:
    if isinstance(exc, OpencodeRefused) and exc.status == 404:
        return (f"{exc}; mail is kept. Restart opencode with the same HOME and project, or stop this "
                f"alarm (`talk alarm stop opencode --session {sid}`) and start one for a live session")
    return f"{exc}; mail is kept and delivered when opencode answers"


def find_or_create_session(client: OpencodeClient, sid: str | None) -> str:
    """The given session id (opencode may be down: it is checked when it answers), or a new one."""
    return sid if sid else client.create_session()


def run(folder: Path, url: str, sid: str | None, pid: int | None, foreground: bool = False) -> int:
    """Run the alarm until SIGTERM/SIGINT; 0 also when another alarm already serves the session."""
    client = OpencodeClient(url)
    if sid is None:
        try:
            sid = find_or_create_session(client, None)
        except OpencodeError as exc:
            setup_logging(start_log(folder), foreground)
            log.error("cannot create an opencode session: %s; is `opencode serve` running at %s?", exc, url)
            return 1
    from spool_writer.layout import check_sid

    files = AlarmFiles(folder, check_sid(sid))
    setup_logging(files.log, foreground)
    lock = hold_for_life(files.lock)
    if lock is None:
        log.info("another alarm already serves session %s; exiting", sid)
        return 0
    alarm = OpencodeAlarm(folder, client, sid, pid)
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: alarm.stop.set())
    alarm.run()
    return 0


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
