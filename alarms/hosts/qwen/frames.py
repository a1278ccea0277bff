"""Qwen Code's cross-session frames, as the Qwen door writes and reads them: pure, no sockets.

Qwen Code (0.24.4, schema and frame version 1) takes NDJSON on a session's inbox socket: an
auth line, then a user frame addressed with `toSessionId`. What became of the message comes
back later, on a separate connection to the writer's own socket (`from`), as delivery-status
control frames authenticated with the writer's `replyToken`.

Every byte read back is hostile: a receipt is used only when every field has the documented
shape, anything else is dropped without a word, as Qwen itself does.

A message id is fixed by the talk message ids it carries and the attempt number, so sending
the same batch again after a crash is recognised: Qwen remembers the ids it settled (the
last 512) and answers a repeat with its earlier verdict instead of queueing it twice.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from durable.digests import blake2b

MSG_V = 1
MAX_LINE_BYTES = 1024 * 1024  # Qwen drops a connection whose line is longer (it counts UTF-16 units)
MAX_DROPPED_IDS = 256
_MSG_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}")
_TOKEN = re.compile(r"[\x21-\x7e]{1,256}")  # printable, no spaces: what Qwen mints is hex or qpc_ + hex

HELD, DELIVERED, DENIED, REFUSED = "held", "delivered", "denied", "refused"
EXPIRED, MISADDRESSED, DROPPED = "expired", "misaddressed", "dropped"
PENDING = "pending"  # ours: sent, no answer yet
STATUSES = (HELD, DELIVERED, DENIED, REFUSED, EXPIRED, MISADDRESSED, DROPPED)
DROP_REASONS = ("rate-limited", "duplicate", "queue-full")
# The documented transitions; any other receipt repeats one already applied and changes nothing.
TRANSITIONS: dict[str, frozenset[str]] = {
    PENDING: frozenset(STATUSES),
    HELD: frozenset({DELIVERED, DENIED, EXPIRED, MISADDRESSED}),
    DELIVERED: frozenset({EXPIRED, MISADDRESSED}),
}


def canonical(msg_id: str) -> str:
    """How Qwen compares message ids: dashes dropped, lower case."""
    return msg_id.replace("-", "").lower()


def is_msg_id(value: object) -> bool:
    return isinstance(value, str) and _MSG_ID.fullmatch(value) is not None and canonical(value) != "all"


def batch_msg_id(talk_ids: Sequence[str], attempt: int) -> str:
    """The Qwen message id of a batch of talk messages at `attempt` (a new attempt, a new id:
    Qwen repeats a settled id's verdict, so a batch sent again *on purpose* needs a fresh one)."""
    seed = "\n".join(talk_ids) + f"\n#{attempt}"
    return "talk-" + blake2b(seed.encode(), digest_size=20).hexdigest()


def can_follow(current: str, status: str) -> bool:
    return status in TRANSITIONS.get(current, frozenset())


def _line(obj: dict[str, Any]) -> bytes:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"


def auth_line(token: str) -> bytes:
    return _line({"msgV": MSG_V, "type": "auth", "token": token})


def user_frame(msg_id: str, content: str, *, to_session: str, from_path: str, reply_token: str,
               from_name: str) -> bytes:
    """One user frame; no `fromMode`: talk is not a coding session and claims no review class."""
    if not is_msg_id(msg_id):
        raise ValueError(f"{msg_id!r} is not a Qwen message id")
    if not content:
        raise ValueError("a Qwen user frame needs a non-empty message")
    return _line({"msgV": MSG_V, "msgId": msg_id, "type": "user", "from": from_path,
                  "replyToken": reply_token, "fromName": from_name, "toSessionId": to_session,
                  "priority": "next", "message": {"role": "user", "content": content}})


def wire(token: str | None, frame: bytes) -> bytes:
    """What one connection carries: the auth line (none where the session's record has no
    token, as an older Qwen's has not) and the frame, in one write."""
    if len(frame) > MAX_LINE_BYTES:
        raise ValueError(f"the frame is {len(frame)} bytes, over the {MAX_LINE_BYTES} Qwen reads")
    return (auth_line(token) if token is not None else b"") + frame


def fits(content: str, margin: int = 4096) -> bool:
    """Whether `content` framed stays under Qwen's line limit (JSON escaping counted)."""
    return len(json.dumps(content, ensure_ascii=False).encode()) + margin <= MAX_LINE_BYTES


@dataclass(frozen=True)
class QwenReceipt:
    status: str
    orig: str  # the message id it settles
    drop_reason: str | None = None
    dropped: tuple[str, ...] = ()  # further ids a `dropped` receipt settles

    def settles(self) -> tuple[str, ...]:
        return (self.orig, *self.dropped)


def _object(line: bytes) -> dict[str, Any] | None:
    try:
        obj = json.loads(line)
    except (ValueError, RecursionError):
        return None
    if not isinstance(obj, dict):
        return None
    version = obj.get("msgV")
    if type(version) is not int or version > MSG_V:  # bool is an int to isinstance: not here
        return None
    return obj


def parse_auth(line: bytes) -> str | None:
    """The token an auth line presents, or None if it is not one."""
    obj = _object(line)
    if obj is None or obj.get("type") != "auth":
        return None
    token = obj.get("token")
    return token if isinstance(token, str) and _TOKEN.fullmatch(token) else None


def parse_receipt(line: bytes) -> QwenReceipt | None:
    """A delivery-status frame, or None for anything else (including a status we do not know,
    which the protocol says to treat as no transition)."""
    obj = _object(line)
    if obj is None or obj.get("type") != "control" or obj.get("action") != "delivery_status":
        return None
    status, orig = obj.get("status"), obj.get("origMsgId")
    if status not in STATUSES or not is_msg_id(orig):
        return None
    assert isinstance(status, str) and isinstance(orig, str)
    if status != DROPPED:
        return QwenReceipt(status, orig)
    reason = obj.get("dropReason")
    more = obj.get("droppedMsgIds")
    ids = tuple(i for i in more[:MAX_DROPPED_IDS] if is_msg_id(i)) if isinstance(more, list) else ()
    return QwenReceipt(status, orig, reason if reason in DROP_REASONS else None, ids)
