"""Following one opencode session's busy/idle state through the server's event stream.

opencode 1.18.33 publishes, on `GET /event`, one `data: {"type", "properties"}` line per event.
Two of them say when a session runs (verified on the real server):

    session.status  {"sessionID", "status": {"type": "busy" | "retry" | "idle"}}
    session.idle    {"sessionID"}           right after a status of idle

A session is busy from the first model request of a run to the end of its last step; mail
posted meanwhile joins the run (`alarms.hosts.opencode.api.prompt_async`). The door needs the state
to look, once the session is idle again, whether what it posted was taken
(`alarms.hosts.opencode.verdict`).

It also follows what the session asks its person, each request by its id:

    permission.asked  {"id", "sessionID", ...}     question.asked  {"id", "sessionID", ...}
    permission.replied {"sessionID", "requestID"}  question.replied / question.rejected (same)

While one is open the door posts nothing. A post does not close the question (measured on
1.18.33: the permission stays pending, answerable), but the message is stored at once, and if
the person refuses, opencode carries on the run they were stopping with the peer's message.

`parse` and `apply` decide from values; `EventFollower` is the thread around them, which
reconnects with backoff and reads `GET /session/status` (and, for a busy session, the open
`GET /permission` and `GET /question`) on each (re)connect, since the stream reports changes only.
"""

from __future__ import annotations

import json
import logging
import threading
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Any

from alarms.hosts.opencode.api import OpencodeClient, OpencodeError
from durable.backoff import Backoff

__all__ = ["Activity", "EventFollower", "Run", "apply", "parse"]

RECONNECT = Backoff(base_s=0.25, cap_s=5.0)
READ_TIMEOUT_S = 60.0  # opencode sends a heartbeat every ~10 s: a silent minute is a dead stream
MAX_LINE = 1 << 22  # a message part can be long; a line past this is skipped, not buffered

log = logging.getLogger("talk.alarm.opencode")

ASKED = frozenset({"permission.asked", "question.asked"})
ANSWERED = frozenset({"permission.replied", "question.replied", "question.rejected"})


class Run(StrEnum):
    UNKNOWN = "unknown"  # not yet read, or the stream is down
    BUSY = "busy"
    IDLE = "idle"


@dataclass(frozen=True)
class Activity:
    """What is known of the session: its state, and how many times it has become idle."""

    run: Run = Run.UNKNOWN
    idles: int = 0  # counts idle transitions, so a caller can tell one after its post
    following: bool = False  # the event stream is connected
    asking: frozenset[str] = frozenset()  # ids of the permissions and questions open for the person


def parse(line: bytes) -> tuple[str, dict[str, Any]] | None:
    """(type, properties) of one `data:` line of the stream; None for anything else."""
    if not line.startswith(b"data:"):
        return None
    try:
        event = json.loads(line[5:])
    except ValueError:
        return None
    if not isinstance(event, dict) or not isinstance(event.get("type"), str):
        return None
    props = event.get("properties")
    return event["type"], props if isinstance(props, dict) else {}


def apply(activity: Activity, kind: str, props: dict[str, Any], sid: str) -> Activity:
    """The activity after one event (unchanged for other sessions' and other kinds of event)."""
    if props.get("sessionID") != sid:
        return activity
    if kind in ASKED and isinstance(props.get("id"), str):
        return replace(activity, asking=activity.asking | {props["id"]})
    if kind in ANSWERED:
        return replace(activity, asking=activity.asking - {props.get("requestID")})
    if kind == "session.idle":
        return _became(activity, Run.IDLE)
    if kind == "session.status":
        status = props.get("status")
        kind_of = status.get("type") if isinstance(status, dict) else None
        return _became(activity, Run.IDLE if kind_of == "idle" else Run.BUSY)
    return activity


def _became(activity: Activity, run: Run) -> Activity:
    if run == Run.IDLE and activity.run == Run.IDLE:
        return activity  # session.idle repeats the idle status just sent
    idles = activity.idles + (run == Run.IDLE)
    # An idle session asks nothing: a question whose answer the stream missed ends with the run.
    return Activity(run, idles, activity.following, frozenset() if run == Run.IDLE else activity.asking)


class EventFollower:
    """A daemon thread keeping `activity` current; `changed` is set whenever it changes."""

    def __init__(self, client: OpencodeClient, sid: str, changed: threading.Event,
                 stop: threading.Event) -> None:
        self.client = client
        self.sid = sid
        self.changed = changed
        self.stop = stop
        self._lock = threading.Lock()
        self._activity = Activity()
        self._thread = threading.Thread(target=self._run, name="opencode-events", daemon=True)

    @property
    def activity(self) -> Activity:
        with self._lock:
            return self._activity

    def start(self) -> EventFollower:
        self._thread.start()
        return self

    def _set(self, activity: Activity) -> None:
        with self._lock:
            if activity == self._activity:
                return
            self._activity = activity
        self.changed.set()

    def _run(self) -> None:
        failures = 0
        while not self.stop.is_set():
            try:
                self._follow()
                failures = 0
            except (OpencodeError, OSError, ValueError) as exc:
                failures += 1
                if failures == 1 or failures % 20 == 0:
                    log.info("event stream: %s; polling until it is back", exc)
            self._set(Activity(Run.UNKNOWN, self.activity.idles, False))  # asks nothing known: posts go on
            self.stop.wait(RECONNECT.delay(max(failures, 1)))

    def _follow(self) -> None:
        resp = self.client.open_events(READ_TIMEOUT_S)
        try:
            # Connected first, then the state: a change between the two arrives as an event.
            busy = self.client.busy(self.sid)
            asking = frozenset(self.client.asking(self.sid)) if busy else frozenset()
            now = self.activity
            self._set(_became(Activity(now.run, now.idles, True, asking), Run.BUSY if busy else Run.IDLE))
            log.info("following opencode's events; session %s is %s", self.sid, self.activity.run)
            while not self.stop.is_set():
                line = resp.readline(MAX_LINE)
                if not line:
                    raise OpencodeError("opencode closed its event stream")
                event = parse(line.rstrip(b"\r\n"))
                if event is not None:
                    self._set(apply(self.activity, *event, self.sid))
        finally:
            resp.close()
