"""The Codex waker: when mail waits for an idle Codex TUI, start a turn there with a fixed nudge.

    (started by the hooks, see `alarms.hosts.codex.tuis`) python -I -S ... --folder IDENTITY_DIR

One process per identity watches the TUI sessions the hooks recorded. Every POLL_S, for each:

- its host (the TUI, `alarms.hosts.codex.host`) has gone: the session is unregistered, so its unread
  mail goes back to the inbox for the next session, and the record is forgotten;
- mail waits (the session's cursor is behind its spool) and the thread is idle (its rollout,
  `alarms.hosts.codex.turns`): `codex queue --thread=SID --message NUDGE`, which makes the TUI start a
  turn whose input is NUDGE. That turn's UserPromptSubmit hook takes the mail through the
  session's cursor and hands it over as added context, framed as peer data.

The nudge is a constant. The peer's words are never the turn's input, which Codex treats as
typed by the user; they reach the model only through the hooks, framed.

`codex queue` answers "queued" even when no process shows the thread any more (and Codex's
app-server daemon then runs the turn with nobody watching), so the host is checked just
before, and a hook running under a daemon for a thread whose TUI has gone hands nothing over.

Nothing here takes mail, so a waker killed at any point loses nothing: the mail stays in the
spool for the next hook. A nudge whose turn ran but left the mail unread (its hooks are not
trusted, say) is not repeated until new mail comes, or the waker would start turns forever;
one that started no turn is repeated after RETRY_S. A busy thread is left alone: its
PostToolUse and Stop hooks deliver. The waker exits once no TUI session has been live for
IDLE_EXIT_S; the next TUI session's hook starts it again.
"""

from __future__ import annotations

import argparse
import logging
import os
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from alarms.hosts.codex import tuis as codex_tuis
from alarms.hosts.codex.tuis import TuiSession
from alarms.hosts.codex.turns import TurnLog

NUDGE = "[talk] new peer mail is waiting; it will be shown to you now"
POLL_S = 0.1
RETRY_S = 30.0
IDLE_EXIT_S = 60.0
QUEUE_TIMEOUT_S = 30.0
ERROR_PAUSE_S = 5.0

log = logging.getLogger("talk.alarm.codex")

SpoolMark = tuple[int, int]  # the session spool's (inode, size): changes when mail arrives


@dataclass(frozen=True)
class Nudge:
    at: float
    spool: SpoolMark  # the spool when the nudge was sent
    turns: int  # turns the thread had started by then


def should_nudge(waiting: bool, idle: bool, spool: SpoolMark, turns: int, last: Nudge | None,
                 now: float) -> bool:
    """Whether to nudge a session now (see the module docstring for each rule)."""
    if not waiting or not idle:
        return False
    if last is None:
        return True
    if turns == last.turns:
        return now - last.at >= RETRY_S  # no turn came of it yet: on its way, or lost
    return spool != last.spool  # a turn ran since: only mail that came after it needs one


def queue_argv(codex_bin: str, sid: str) -> list[str]:
    """`codex queue` with the fixed nudge; `--thread=SID` keeps a sid that starts with "-" a value."""
    return [codex_bin, "queue", f"--thread={sid}", "--message", NUDGE]


def spool_mark(spool: Path) -> SpoolMark | None:
    try:
        st = spool.stat()
    except OSError:
        return None
    return st.st_ino, st.st_size


def waiting(spool: Path, cursor_file: Path, mark: SpoolMark) -> bool:
    """Unread mail in the spool, judged like the hook's fast path (without marking a read)."""
    import json

    from spool_writer.peek import caught_up

    try:
        cursor = json.loads(cursor_file.read_bytes())
    except FileNotFoundError:
        return mark[1] > 0
    except (OSError, ValueError):
        return True
    return not caught_up(cursor, *mark)


class Waker:
    """One identity's TUI sessions; `step` looks at each once."""

    def __init__(self, folder: Path) -> None:
        from spool_writer.layout import SpoolLayout

        self.folder = folder
        self.layout = SpoolLayout(folder / "spool")
        self.logs: dict[str, TurnLog] = {}
        self.nudges: dict[str, Nudge] = {}
        self.last_live = time.monotonic()

    def step(self) -> bool:
        """One look at every session; False when it is time to exit."""
        from spool_writer import registry

        records = registry.load(self.layout) if self.layout.registry.exists() else {}
        live = 0
        for sid, session in codex_tuis.load_all(self.folder).items():
            record = records.get(sid)
            if record is None:
                self._forget(sid)
            elif not record.alive():
                self._ended(sid, record.pid)
            else:
                live += 1
                self._look(session)
        if live:
            self.last_live = time.monotonic()
        return time.monotonic() - self.last_live < IDLE_EXIT_S

    def _forget(self, sid: str) -> None:
        codex_tuis.forget(self.folder, sid)
        self.logs.pop(sid, None)
        self.nudges.pop(sid, None)

    def _ended(self, sid: str, pid: int) -> None:
        from durable.errors import NotFound
        from spool_writer.sessions import unregister

        try:
            moved = unregister(self.layout.root, sid)
            log.info("session %s: its Codex TUI (pid %d) has gone; %d unread line(s) back to the inbox",
                     sid, pid, moved)
        except NotFound:
            pass
        self._forget(sid)

    def _look(self, session: TuiSession) -> None:
        sid = session.sid
        mark = spool_mark(self.layout.session_file(sid))
        if mark is None or not waiting(self.layout.session_file(sid), self.layout.cursor_file(sid), mark):
            return
        turns = self.logs.setdefault(sid, TurnLog(session.transcript)).look()
        if turns is None:
            return  # no rollout to tell idle from busy: the hooks deliver with the next turn
        now = time.monotonic()
        if not should_nudge(True, turns.idle, mark, turns.started, self.nudges.get(sid), now):
            return
        self.nudges[sid] = Nudge(now, mark, turns.started)
        self._queue(session)

    def _queue(self, session: TuiSession) -> None:
        env = {**os.environ, "CODEX_HOME": session.codex_home}
        cwd = session.cwd if os.path.isdir(session.cwd) else None
        try:
            done = subprocess.run(queue_argv(session.codex_bin, session.sid), env=env, cwd=cwd,
                                  stdin=subprocess.DEVNULL, capture_output=True, timeout=QUEUE_TIMEOUT_S)
        except (OSError, subprocess.TimeoutExpired) as exc:
            log.warning("session %s: codex queue failed (%s); trying again in %.0f s", session.sid, exc,
                        RETRY_S)
            return
        if done.returncode != 0:
            err = done.stderr.decode(errors="replace").strip().splitlines()
            log.warning("session %s: codex queue exited %d (%s); trying again in %.0f s", session.sid,
                        done.returncode, err[-1] if err else "", RETRY_S)
        else:
            log.info("session %s: nudged", session.sid)


def run(folder: Path) -> int:
    from durable.daemon import setup_logging
    from durable.locks import hold_for_life

    codex = folder / codex_tuis.FOLDER
    codex.mkdir(mode=0o700, exist_ok=True)
    if hold_for_life(codex / codex_tuis.LOCK) is None:
        return 0  # another waker runs
    setup_logging(codex / codex_tuis.LOG, to_stderr=False)
    log.info("Codex waker for %s (pid %d)", folder, os.getpid())
    waker = Waker(folder)
    while True:
        try:
            if not waker.step():
                log.info("no live Codex TUI session for %.0f s: exiting", IDLE_EXIT_S)
                return 0
        except Exception:
            # A damaged registry, a full disk: say so once in a while, not ten times a second.
            log.exception("look failed; trying again in %.0f s", ERROR_PAUSE_S)
            time.sleep(ERROR_PAUSE_S)
        time.sleep(POLL_S)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="codex waker")
    parser.add_argument("--folder", required=True, type=Path, help="the talk identity folder")
    return run(parser.parse_args(argv).folder)
