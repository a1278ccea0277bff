"""Claude Code's own inbox: the per-session socket its cross-session messaging listens on.

Claude Code 2.1.224 and later bind a Unix socket per session and give its hooks, Bash commands
and plugin monitors its path and a token (CLAUDE_CODE_MESSAGING_SOCKET, _TOKEN); the session
registry record `<config dir>/sessions/<pid>.json` names the path too (`messagingSocketPath`),
and the token sits in `<pid>.<hash>.key` beside it (`peerToken`). A writer sends NDJSON lines,
each at most 1 MiB: an auth line with the token, then one user frame per message. Claude Code
delivers a frame that comes from one of the session's own child processes between tool calls
of a running turn, or as a new turn when the session is idle, with its text whole. So only a
monitor or a hook writes here, never the follower, which the session did not start.

The socket takes the bytes and says nothing: a frame written earns a `written` receipt, and
`delivered` only when the transcript shows the frame's id (`alarms.handover`).

Claude Code wraps what comes this way as "Another Claude session sent a message" (a user turn
when idle, a system message mid-turn) and adds that the sender is very likely working on the
user's behalf (measured on 2.1.332). It is the only door that wakes the session, so the frame
names that channel (`alarms.framing`): its standing is not the peer's.

`door_from` and `frame_line` decide from values; `find_door` and `write` are the I/O.
"""

from __future__ import annotations

import glob
import json
import os
import re
import socket
from collections.abc import Mapping
from dataclasses import dataclass

from alarms import handover
from alarms.framing import frame
from alarms.handover import inbox_id
from alarms.hosts.claude.session import read_json, read_record, records_dir
from spool_writer.layout import SpoolLayout
from spool_writer.record import SpoolRecord

SOCKET_ENV = "CLAUDE_CODE_MESSAGING_SOCKET"
TOKEN_ENV = "CLAUDE_CODE_MESSAGING_TOKEN"
MAX_LINE = 1024 * 1024  # Claude Code's limit for one line, its newline included
TIMEOUT_S = 10.0  # Claude Code closes a connection without a whole line after 30 s
FINGERPRINT = re.compile(r"[0-9a-f]{32}")
CHANNEL = "a message Claude Code presents as another Claude session's, likely working for your user"


class DoorError(Exception):
    """The inbox socket could not be written; the mail stays with talk."""


@dataclass(frozen=True)
class InboxDoor:
    path: str
    token: str | None


def door_from(env: Mapping[str, str], record: Mapping[str, object] | None,
              token: str | None) -> InboxDoor | None:
    """The session's inbox: from the environment Claude Code gave us, else from its registry
    record (with the token from its key file); None where messaging is off or too old."""
    path = env.get(SOCKET_ENV) or ""
    if path:
        return InboxDoor(path, env.get(TOKEN_ENV) or token)
    found = record.get("messagingSocketPath") if record else None
    return InboxDoor(found, token) if isinstance(found, str) and found else None


def find_door(env: Mapping[str, str], pid: int) -> InboxDoor | None:
    """The inbox of the Claude Code process `pid`, if it has one."""
    if env.get(SOCKET_ENV):
        return door_from(env, None, None)
    sessions = records_dir(env)
    token = None
    for key_file in glob.glob(os.path.join(glob.escape(sessions), f"{pid}.*.key")):
        value = (read_json(key_file) or {}).get("peerToken")
        token = value if isinstance(value, str) and value else token
    return door_from(env, read_record(env, pid), token)


def sender(records: list[SpoolRecord]) -> str:
    """The frame's `from`: Claude Code keys its per-sender limits on it, so one per peer."""
    fp = str(records[0].get("from", "")) if records else ""
    return "talk:" + (fp if FINGERPRINT.fullmatch(fp) else "peer")


def frame_line(records: list[SpoolRecord]) -> bytes:
    """One user frame holding `records` framed as peer text, as one NDJSON line."""
    frame_obj = {"type": "user", "msgV": 1, "msg_id": inbox_id(records[0]["id"]), "from": sender(records),
                 "priority": "next", "message": {"role": "user", "content": frame(records, channel=CHANNEL)}}
    return json.dumps(frame_obj, ensure_ascii=False).encode() + b"\n"


def auth_line(token: str) -> bytes:
    return json.dumps({"type": "auth", "token": token}).encode() + b"\n"


def fits(records: list[SpoolRecord]) -> int:
    """How many of `records`, from the first, one frame can carry (at least one: a message
    talk accepts is far below the limit even framed and escaped)."""
    n = len(records)
    while n > 1 and len(frame_line(records[:n])) > MAX_LINE:
        n -= 1
    return n


def write(door: InboxDoor, records: list[SpoolRecord]) -> None:
    """Hand `records` to the session in one frame, after the auth line; DoorError if the
    socket is gone or refuses."""
    line = frame_line(records)
    if len(line) > MAX_LINE:
        raise DoorError(f"a frame of {len(line)} bytes is over the inbox's {MAX_LINE}-byte limit")
    payload = (auth_line(door.token) if door.token else b"") + line
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
            conn.settimeout(TIMEOUT_S)
            conn.connect(door.path)
            conn.sendall(payload)
            conn.shutdown(socket.SHUT_WR)
    except OSError as exc:
        raise DoorError(f"Claude Code's inbox {door.path} refused the mail: {exc}") from exc


def hand_on(layout: SpoolLayout, sid: str, door: InboxDoor, host: int, transcript: str | None,
            reconcile: bool = True) -> list[SpoolRecord]:
    """Take the session's new mail and write it to its inbox; what was written.

    The batch is pending, held by this process, before the cursor moves; once the socket took
    it, the Claude Code process `host` holds it and it earns `written`. If the socket refuses,
    the batch is released for the next take and DoorError says why.
    """
    records = handover.take(layout, sid, transcript, record=True, reconcile=reconcile, door=handover.INBOX,
                           fit=lambda out: (fits(out), None))
    if not records:
        return []
    try:
        write(door, records)
    except DoorError:
        handover.release(layout, sid, records)
        raise
    handover.written(layout, sid, records, host)
    return records
