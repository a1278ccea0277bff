"""The door `talk run copilot` opens: peer mail sent into the TUI's session through the JSON-RPC
server of `copilot --ui-server --port N` (Copilot CLI 1.0.102).

The server speaks the Copilot SDK's protocol (`rpc`): `session.getForeground` names the session
the TUI shows; `session.resume` attaches this connection to it, after which the server sends its
events (`session.event`) here too; `session.send` {sessionId, prompt, mode} queues a prompt and
answers with its messageId. The door registers that session in the spool as host `copilot`, with
the same session id and process the hooks register, so the hooks and this door take mail through
the session's one cursor and never hand a message on twice.

Each batch is pending (`alarms.handover`, door TURN) before the cursor moves; once the server
accepted the prompt the Copilot process holds it (`written`); once the session's event log
(`session-state/SID/events.jsonl`) shows its messages' ids it is `delivered`. A prompt the server
refused is released for the next take. When mail may go in is `activity`'s to say: only into an
idle session, which it starts a turn of (in a turn the hooks hand mail on, after each tool call).

When the TUI switches to another session (/clear, /resume), the door follows it, and retires the
session it leaves: that session's unread mail goes back to the inbox, which the new session's
registration takes over (a line the new session already holds is not added twice). The hooks
register a session again when it runs a turn.
"""

from __future__ import annotations

import glob
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from alarms import handover
from alarms.framing import frame
from alarms.hosts.copilot import NAME as HOST
from alarms.hosts.copilot.activity import Activity, Send, next_send
from alarms.hosts.copilot.rpc import Connection, RpcError
from alarms.mailbox import SessionMail
from alarms.procnet import peer_owner, pid_listening_on
from spool_writer.peek import nothing_new

__all__ = ["Calls", "UiDoor"]

POLL_S = 0.2  # how often an idle door looks at the spool (one stat) and the foreground session
CONNECT_S = 180.0  # node loading Copilot's bundle on a busy machine: well over a minute
SHOWN_S = 10.0  # how long the door waits for an accepted prompt to reach the event log
RETRY_S = 2.0  # after a refused send


class Calls(Protocol):
    """Where the door's calls go: Copilot's server (`rpc.Connection`) or talk's extension
    (`ext_door.Bridge`). `call` raises RpcError when refused, gone or late."""

    @property
    def closed(self) -> bool: ...

    def call(self, method: str, params: dict[str, Any], timeout: float = ...) -> Any: ...


class DoorStopped(Exception):
    """Copilot ended, or its server went away, before the door could do its part."""


def events_log(workspace: str) -> str:
    return os.path.join(workspace, "events.jsonl")


def holder_pid(workspace: str) -> int | None:
    """The Copilot process that has the session open: its `inuse.PID.lock` (the process the
    hooks find as `copilot` above them, and register)."""
    for path in sorted(glob.glob(os.path.join(glob.escape(workspace), "inuse.*.lock"))):
        pid = os.path.basename(path).split(".")[1]
        if pid.isdigit() and os.path.exists(f"/proc/{pid}"):
            return int(pid)
    return None


def descends_from(pid: int, ancestor: int) -> bool:
    """Whether `pid` is `ancestor` or one of its descendants (Linux: /proc)."""
    for _ in range(32):
        if pid == ancestor:
            return True
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            return False
        pid = int(stat[stat.rindex(")") + 2:].split()[1])
        if pid <= 1:
            return False
    return False


class UiDoor:
    """`run()` serves until `stop()` or until Copilot's server goes away. `launched` is the pid
    talk started Copilot as, `alive` says whether it still runs; `say` gets one line for the
    user (a note, never mail).

    Events reach `_notice` on the connection's reader thread, which also reads the answers to
    this door's calls: nothing may call the server while holding `changed`, or both wait."""

    def __init__(self, folder: Path, port: int, cwd: str, launched: int, alive: Callable[[], bool],
                 say: Callable[[str], None]) -> None:
        self.folder, self.port, self.cwd, self.launched = folder, port, cwd, launched
        self.alive, self.say = alive, say
        self.activity = Activity()
        self.ours: set[str] = set()  # prompts this door sent
        self.changed = threading.Condition()
        self.stopped = threading.Event()
        self.sid: str | None = None
        self.workspace = ""
        self.host = 0
        self.conn: Connection | None = None

    def stop(self) -> None:
        self.stopped.set()
        with self.changed:
            self.changed.notify_all()

    def run(self) -> None:
        try:
            self.conn = self._connect()
            with self.conn:
                self._serve(self.conn)
        except DoorStopped:
            return
        except Exception as exc:  # a broken door must say so, and leave Copilot running
            if self.alive() and not self.stopped.is_set():
                self.say(f"the Copilot door closed ({type(exc).__name__}: {exc}); "
                         "mail now waits for Copilot's hooks")

    def _connect(self) -> Connection:
        deadline = time.monotonic() + CONNECT_S
        while True:
            if self.stopped.is_set() or not self.alive():
                raise DoorStopped
            try:
                conn = Connection.open(self.port, self._notice)
                break
            except RpcError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        owner = peer_owner(conn.sock)
        if owner != os.getuid():  # another user's listener got the port first: it gets no mail
            conn.close()
            raise RpcError(f"port {self.port} is not served by your Copilot CLI (owner uid {owner})")
        return conn

    def _notice(self, message: dict[str, Any]) -> None:
        params = message.get("params")
        params = params if isinstance(params, dict) else {}
        event = params.get("event") if message.get("method") == "session.event" else None
        with self.changed:
            if isinstance(event, dict) and params.get("sessionId") == self.sid:
                data = event.get("data")
                self.activity.seen(str(event.get("type", "")), data if isinstance(data, dict) else {})
                self.activity.user_typed(self.ours)
            self.changed.notify_all()

    def _serve(self, conn: Calls) -> None:
        while not self.stopped.is_set() and not conn.closed and self.alive():
            self._follow(conn)
            if self.sid is not None and self._due():
                self._hand_on(conn)
            with self.changed:
                self.changed.wait(POLL_S)

    def _follow(self, conn: Calls) -> None:
        """Attach to the session the TUI shows, and register it, when it is a new one."""
        shown = conn.call("session.getForeground", {})
        sid = shown.get("sessionId") if isinstance(shown, dict) else None
        if not isinstance(sid, str) or not sid or sid == self.sid:
            return
        workspace = str(shown.get("workspacePath") or "")
        conn.call("session.resume", {"sessionId": sid, "suppressResumeEvent": True})
        host = holder_pid(workspace) if workspace else None
        listener = pid_listening_on(self.port)
        # The port may have gone to another program (even another Copilot) before ours bound it.
        if host is None or listener != host or not descends_from(host, self.launched):
            raise RpcError(f"port {self.port} is served by pid {listener}, not by the Copilot CLI "
                           "talk started")
        if self.sid is not None:  # left behind (/clear, /resume): its unread mail follows the TUI
            SessionMail(self.folder, self.sid).retire()
        SessionMail(self.folder, sid).register(HOST, host)
        trusted = self._trusted(conn, sid)  # not under the lock: the reader thread needs it for events
        with self.changed:
            self.sid, self.workspace, self.host = sid, workspace, host
            self.activity = Activity(trusted=trusted)

    def _trusted(self, conn: Calls, sid: str) -> bool:
        """Whether the folder is trusted for good (a trust given for this session only is not
        visible here: `activity` then waits for the TUI's sign)."""
        try:
            answer = conn.call("session.permissions.folderTrust.isTrusted",
                               {"sessionId": sid, "path": self.cwd})
        except RpcError:
            return False
        return isinstance(answer, dict) and answer.get("trusted") is True

    def _due(self) -> bool:
        return self.sid is not None and not nothing_new(self.folder, self.sid)

    def _mode(self, conn: Calls) -> Send:
        assert self.sid is not None
        with self.changed:
            if next_send(self.activity, False) is Send.HOLD:
                return Send.HOLD  # no need to ask the server
        pending = conn.call("session.permissions.pendingRequests", {"sessionId": self.sid})
        items = pending.get("items") if isinstance(pending, dict) else None
        with self.changed:
            return next_send(self.activity, bool(items))

    def _hand_on(self, conn: Calls) -> None:
        mode = self._mode(conn)
        if mode is Send.HOLD:
            return
        assert self.sid is not None
        sid, log = self.sid, events_log(self.workspace)
        layout = SessionMail(self.folder, sid).layout
        records = handover.take(layout, sid, log, record=True, door=handover.TURN,
                                fit=lambda out: (len(out), None))
        if not records:
            handover.settle(layout, sid, log)
            return
        prompt = frame(records)
        with self.changed:
            self.ours.add(prompt)
        try:
            conn.call("session.send", {"sessionId": sid, "prompt": prompt, "mode": mode.value})
        except RpcError as exc:
            handover.release(layout, sid, records)  # the next take hands it on first
            self.say(f"Copilot CLI did not take the mail ({exc}); trying again")
            self.stopped.wait(RETRY_S)
            return
        handover.written(layout, sid, records, self.host)
        self._await_shown([f"id {r['id']}" for r in records], log)
        handover.settle(layout, sid, log)

    def _await_shown(self, markers: list[str], log: str) -> None:
        """Until the session took the prompt (its user message) and its event log shows it."""
        deadline = time.monotonic() + SHOWN_S
        with self.changed:
            self.changed.wait_for(lambda: self.activity.showed(markers) or self.stopped.is_set(),
                                  SHOWN_S)
        wanted = [m.encode() for m in markers]
        while time.monotonic() < deadline and not self.stopped.is_set():
            try:
                data = Path(log).read_bytes()
            except OSError:
                data = b""
            if all(m in data for m in wanted):
                return
            time.sleep(0.05)
