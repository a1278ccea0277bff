"""The door of `talk run codex`: a second client of the session's app-server that gives peer mail
to the TUI's thread as the input of a turn.

The TUI (`codex --remote unix://SOCK`) opens its thread as it starts, before any prompt, and the
server tells every client (`thread/started`, with the thread's rollout path). From then on:

- the session is registered (host codex, the TUI's pid), so mail for it lands in its spool;
- mail waiting while the thread is idle: `turn/start` with the framed mail as its input, which
  the TUI shows as a turn of its own and the model reads as a user-role message: the channel
  with the least authority, not the developer role of the hooks' added context;
- mail arriving while a turn runs: the same call, which Codex 0.171 takes as a steer of the
  running turn (the model reads it with its next request, after the current tool call);
- the thread waits on the user (an approval, or a question: `activeFlags`): nothing is given
  until the user has answered. A steer would wait behind the approval anyway, but if the user
  refuses the command and the turn ends, the input's fate is Codex's, not ours.

Exactly once, through the session's one cursor (`alarms.handover`, door TURN): the batch is
taken, and recorded as pending under this process, before the call; an error answer or a lost
connection releases it, to be given again first. Accepted, it stays pending until the rollout
shows its markers, which earns each message its `delivered` receipt (the next look does that).
The hooks, when installed, share that cursor, and stand down while this door holds its lock
(`alarms.hosts.codex.hook`): so no message is given twice, and none in the developer role.

A resumed thread (`talk run codex resume ID`) is announced by no `thread/started`, only by its
status: a status of a thread not seen before is looked up (`thread/read`) once, and taken for
the TUI's when it is a thread of the user's (Codex 0.171.0, verified).

When the TUI opens another thread (/new, resume), the door follows it: the old session is unregistered,
its unread mail goes back to the inbox, and the new one is registered. `decide` and `noted` are
pure; `RemoteDoor` is the loop around them.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from alarms.hosts.codex.socket_rpc import RemoteClient, RpcError

__all__ = ["RemoteDoor", "ThreadView", "may_give", "noted", "turn_input", "unknown_thread"]

POLL_S = 0.1
RECONCILE_S = 1.0  # how often a batch given but not yet in the rollout is looked for there
ERROR_PAUSE_S = 5.0
IDLE, ACTIVE = "idle", "active"

log = logging.getLogger("talk.alarm.codex")


@dataclass(frozen=True)
class ThreadView:
    """What the door knows of the TUI's thread, from the server's notifications."""

    sid: str | None = None
    rollout: str | None = None
    status: str = "notLoaded"
    flags: tuple[str, ...] = ()  # what an active thread waits for: "waitingOnApproval", ...


def _user_thread(thread: Any) -> bool:
    """A thread the TUI shows: not Codex's own throwaway (the title request) nor a sub-agent's."""
    return (isinstance(thread, dict) and isinstance(thread.get("id"), str) and not thread.get("ephemeral")
            and not thread.get("parentThreadId"))


def noted(view: ThreadView, note: dict[str, Any]) -> ThreadView:
    """`view` after one notification from the server."""
    params = note.get("params")
    if not isinstance(params, dict):
        return view
    method = note.get("method")
    if method == "thread/started" and _user_thread(params.get("thread")):
        thread = params["thread"]
        path = thread.get("path")
        status = thread.get("status")
        status = status if isinstance(status, dict) else {}
        return ThreadView(thread["id"], path if isinstance(path, str) else None,
                          str(status.get("type", IDLE)), ())
    if method == "thread/status/changed" and params.get("threadId") == view.sid:
        status = params.get("status")
        status = status if isinstance(status, dict) else {}
        flags = status.get("activeFlags")
        flags = flags if isinstance(flags, list) else []
        return replace(view, status=str(status.get("type", "")), flags=tuple(map(str, flags)))
    return view


def unknown_thread(view: ThreadView, note: dict[str, Any], known: set[str]) -> str | None:
    """The id of a thread whose status changed and that the door has not seen before: a thread
    the TUI resumed, to be looked up."""
    params = note.get("params")
    if note.get("method") != "thread/status/changed" or not isinstance(params, dict):
        return None
    thread_id = params.get("threadId")
    if not isinstance(thread_id, str) or thread_id == view.sid or thread_id in known:
        return None
    return thread_id


def may_give(view: ThreadView) -> bool:
    """Whether mail may go to the thread now: it exists, is idle or runs a turn, and waits on
    nobody (see the module docstring)."""
    return view.sid is not None and view.status in (IDLE, ACTIVE) and not view.flags


def turn_input(text: str) -> list[dict[str, Any]]:
    """The input of a turn: the framed mail as plain text, as if pasted (Codex's `UserInput`)."""
    return [{"type": "text", "text": text, "text_elements": []}]


class RemoteDoor:
    """The door for one TUI: `run` until `stop` is set or the connection closes."""

    def __init__(self, folder: Path, client: RemoteClient, host_pid: int) -> None:
        from spool_writer.layout import SpoolLayout

        self.folder = folder
        self.client = client
        self.host_pid = host_pid
        self.layout = SpoolLayout(folder / "spool")
        self.view = ThreadView()
        self.stop = threading.Event()
        self.given = 0  # batches Codex accepted, for the tests and the log
        self._looked: tuple[int, int] | None = None
        self._reconciled = 0.0
        self._known: set[str] = set()  # threads seen, the session's or not: never looked up again
        self._held: tuple[str, ...] = ()  # what the user was asked when mail was last held for it

    def run(self) -> None:
        try:
            while not self.stop.is_set():
                try:
                    if not self._step():
                        return
                except Exception:
                    # A damaged spool, a full disk: the door lives on (while it does, the hooks
                    # stand down), and says so once in a while, not ten times a second.
                    log.exception("look failed; trying again in %.0f s", ERROR_PAUSE_S)
                    self.stop.wait(ERROR_PAUSE_S)
        finally:
            self._end(self.view.sid)

    def _step(self) -> bool:
        """One notification (or a poll's wait) and, when due, one hand-over; False once the
        connection has closed."""
        note = self.client.next_note(POLL_S)
        if note is not None:
            self._note(note)
        elif not self.client.open:
            return False
        if may_give(self.view):
            self._held = ()
            if self._due():
                self._give()
        elif self.view.flags and self.view.flags != self._held and self._due():
            self._held = self.view.flags
            log.info("session %s: mail waits while the user is asked (%s)", self.view.sid,
                     ", ".join(self._held))
        return True

    def _note(self, note: dict[str, Any]) -> None:
        if note.get("method") == "thread/started":
            thread = note.get("params", {}).get("thread")
            if isinstance(thread, dict) and isinstance(thread.get("id"), str):
                self._known.add(thread["id"])
        resumed = unknown_thread(self.view, note, self._known)
        if resumed is not None:
            self._known.add(resumed)
            note = self._looked_up(resumed, note)
        view = noted(self.view, note)
        if view.sid != self.view.sid and view.sid is not None:
            self._end(self.view.sid)
            self._begin(view.sid)
        self.view = view

    def _looked_up(self, thread_id: str, note: dict[str, Any]) -> dict[str, Any]:
        """A status note of a thread not seen before, as the `thread/started` it would have been
        had the TUI started it here; the note itself when it is not a thread of the user's."""
        try:
            found = self.client.request("thread/read", {"threadId": thread_id})
        except RpcError as exc:
            log.warning("thread %s: cannot look it up (%s)", thread_id, exc)
            return note
        thread = found.get("thread") if isinstance(found, dict) else None
        if not isinstance(thread, dict):
            return note
        status = note.get("params", {}).get("status")
        return {"method": "thread/started", "params": {"thread": {**thread, "status": status}}}

    def _begin(self, sid: str) -> None:
        from alarms.mailbox import SessionMail

        took = SessionMail(self.folder, sid).register("codex", self.host_pid)
        self._looked = None
        log.info("session %s: registered for the TUI (pid %d); %d line(s) from the inbox", sid, self.host_pid,
                 took)

    def _end(self, sid: str | None) -> None:
        if sid is None:
            return
        from durable.errors import NotFound
        from spool_writer.sessions import unregister

        try:
            moved = unregister(self.layout.root, sid)
            log.info("session %s: ended; %d unread line(s) back to the inbox", sid, moved)
        except NotFound:
            pass

    def _due(self) -> bool:
        """New mail in the spool since the last look, or a given batch to look for in the rollout."""
        from alarms import handover
        from alarms.hosts.codex.waker import spool_mark, waiting

        sid = self.view.sid
        assert sid is not None
        spool = self.layout.session_file(sid)
        mark = spool_mark(spool)
        if mark is not None and mark != self._looked and waiting(spool, self.layout.cursor_file(sid), mark):
            return True
        pending = os.path.exists(handover.pending_file(str(self.layout.sessions_dir), sid))
        return pending and time.monotonic() - self._reconciled >= RECONCILE_S

    def _give(self) -> None:
        from alarms import handover
        from alarms.framing import frame
        from alarms.hosts.codex.waker import spool_mark

        sid = self.view.sid
        assert sid is not None
        self._reconciled = time.monotonic()
        records = handover.take(self.layout, sid, self.view.rollout, record=self.view.rollout is not None,
                                door=handover.TURN, holder=os.getpid())
        self._looked = spool_mark(self.layout.session_file(sid))
        if not records:
            return
        try:
            answer = self.client.request("turn/start", {"threadId": sid, "input": turn_input(frame(records))})
        except RpcError as exc:
            handover.release(self.layout, sid, records)
            self._looked = None
            log.warning("session %s: codex refused the mail (%s); trying again in %.0f s", sid, exc,
                        ERROR_PAUSE_S)
            self.stop.wait(ERROR_PAUSE_S)
            return
        self.given += 1
        turn = answer.get("turn", {}).get("id") if isinstance(answer, dict) else None
        log.info("session %s: %d message(s) given as the input of turn %s (%s)", sid, len(records), turn,
                 "a steer" if self.view.status == ACTIVE else "a new turn")
