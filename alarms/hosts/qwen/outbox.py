"""The Qwen door's outbox: mail taken from a session's spool, until Qwen Code settles it.

Taking mail (`QwenOutbox.fill`) is done under the session's cursor lock, outbox first and cursor
second, like `alarms.hosts.opencode.outbox`: a crash before the outbox write leaves the mail in the
spool, a crash after it leaves it here, and ids already here are never taken twice. The
sender's `delivered` receipt (the hand-over log) is written only when Qwen answers `delivered`
for the batch, never when it is taken.

Each batch keeps its Qwen message id (`qwen_frames.batch_msg_id`) until an answer says to send
it anew, so a batch sent again after a crash or a lost receipt is the same message to Qwen,
which repeats its earlier verdict instead of queueing it twice. What each answer does:

- `delivered`: queued for the model. The hand-over is recorded; the batch is kept a while in case
  `expired` follows (the session quit with it unread), then forgotten.
- `held`: parked for the user's review in `/peers`; a decision or an expiry follows. Asked again
  (same id, which repeats the verdict) now and then, since receipts can be lost.
- `denied`: the user said no. Dropped, not delivered, and never sent again.
- `refused`: the session's policy turns peer messages away. Kept; tried again, under a new id,
  every `REFUSED_RETRY_S` (the user may change the setting), and sooner to another session.
- `expired`: it waited too long or the session quit. Sent again under a new id.
- `misaddressed`: the session id changed (`/clear`, `/resume`). Sent again under a new id to
  the session id read afresh.
- `dropped`: turned away before any policy ran, leaving no trace. Sent again, same id, backing off;
  for a `duplicate` (Qwen took this very text from us within its dedup window: it has it, and
  answers every copy so until the window ends) once the window has passed, when a copy of a
  settled id gets Qwen's earlier verdict. Backing off by seconds would only be answered
  `duplicate` again, and stretch the wait past the window by up to the last step.
- no answer within `RECEIPT_WAIT_S` (receipts are best-effort): sent again, same id, backing off.
- the socket did not take the frame: tried again after `SEND_RETRY_S`, same id.

`add`, `due`, `sent`, `failed`, `apply`, `retarget` and `retire` decide from values alone.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from alarms.hosts.qwen import frames as f
from alarms.outbox import StateFile, taking
from spool_writer.layout import SpoolLayout
from spool_writer.record import SpoolRecord

VERSION = 1
RECENT = 512  # ids settled here, so a record read again after a crash is not taken twice
RECEIPT_WAIT_S = 10.0
SEND_RETRY_S = 1.0  # the socket refused or timed out: Qwen is restarting, busy, or gone
HELD_RECHECK_S = 60.0
REFUSED_RETRY_S = 600.0
EXPIRED_RETRY_S = 5.0
DROP_CAP_S = 60.0
# Qwen Code 0.24.4 answers `duplicate` to a text identical to the sender's last one it took, for
# 30 s after it took it; that was before the answer came, so the window has passed by then + 30 s.
DUPLICATE_WINDOW_S = 31.0
KEEP_DELIVERED_S = 600.0
MAX_BATCH_CHARS = 512 * 1024  # far under Qwen's 1 MiB line, whatever JSON escaping does


@dataclass(frozen=True)
class Batch:
    ids: tuple[str, ...]
    senders: tuple[str, ...]  # each message's sender fingerprint, for its `delivered` receipt
    text: str
    sid: str  # the talk session it is for
    attempt: int = 0
    status: str = f.PENDING
    sends: int = 0  # of the current message id
    sent_at: float = 0.0
    next_at: float = 0.0
    drops: int = 0
    delivered_at: float = 0.0

    @property
    def msg_id(self) -> str:
        return f.batch_msg_id(self.ids, self.attempt)

    def anew(self, next_at: float, status: str = f.PENDING) -> Batch:
        """The batch under a fresh message id, to be sent at `next_at`."""
        return replace(self, attempt=self.attempt + 1, status=status, sends=0, sent_at=0.0,
                       next_at=next_at, drops=0)

    def to_json(self) -> dict[str, Any]:
        return {"ids": list(self.ids), "senders": list(self.senders), "text": self.text, "sid": self.sid,
                "attempt": self.attempt, "status": self.status, "sends": self.sends,
                "sent_at": self.sent_at, "next_at": self.next_at, "drops": self.drops,
                "delivered_at": self.delivered_at}

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> Batch:
        return cls(tuple(map(str, obj["ids"])), tuple(map(str, obj["senders"])), str(obj["text"]),
                   str(obj["sid"]), int(obj["attempt"]), str(obj["status"]), int(obj["sends"]),
                   float(obj["sent_at"]), float(obj["next_at"]), int(obj["drops"]),
                   float(obj["delivered_at"]))


@dataclass(frozen=True)
class OutboxState:
    batches: tuple[Batch, ...] = ()
    recent: tuple[str, ...] = ()
    counts: dict[str, int] = field(default_factory=dict)  # answers seen, by status

    def to_json(self) -> dict[str, Any]:
        return {"v": VERSION, "batches": [b.to_json() for b in self.batches], "recent": list(self.recent),
                "counts": dict(self.counts)}

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> OutboxState:
        counts = obj.get("counts", {})
        return cls(tuple(Batch.from_json(b) for b in obj.get("batches", [])),
                   tuple(map(str, obj.get("recent", []))), {str(k): int(v) for k, v in counts.items()})

    def waiting(self) -> int:
        """Messages not yet queued for the model."""
        return sum(len(b.ids) for b in self.batches if b.status != f.DELIVERED)


def fresh(records: Sequence[SpoolRecord], state: OutboxState) -> list[SpoolRecord]:
    known = set(state.recent) | {i for b in state.batches for i in b.ids}
    return [r for r in records if str(r.get("id")) not in known]


def split(records: Sequence[SpoolRecord], limit: int = MAX_BATCH_CHARS) -> list[list[SpoolRecord]]:
    """Records in order, in groups whose texts stay under `limit` (a longer one goes alone)."""
    groups: list[list[SpoolRecord]] = []
    size = 0
    for record in records:
        n = len(str(record.get("text", "")))
        if not groups or size + n > limit:
            groups.append([])
            size = 0
        groups[-1].append(record)
        size += n
    return groups


def add(state: OutboxState, sid: str, records: Sequence[SpoolRecord],
        text_of: Callable[[list[SpoolRecord]], str]) -> OutboxState:
    new = [Batch(tuple(str(r["id"]) for r in group), tuple(str(r.get("from", "")) for r in group),
                 text_of(group), sid) for group in split(fresh(records, state))]
    return replace(state, batches=(*state.batches, *new))


def due(batch: Batch, now: float) -> bool:
    """Whether to send the batch (again) now."""
    if batch.status == f.DELIVERED or now < batch.next_at:
        return False
    if batch.sends == 0:
        return True
    if batch.status == f.HELD:
        return now - batch.sent_at >= HELD_RECHECK_S
    return now - batch.sent_at >= RECEIPT_WAIT_S * 2.0 ** min(batch.sends - 1, 4)


def _swap(state: OutboxState, old: Batch, new: Batch | None) -> OutboxState:
    batches = tuple(b for b in (new if b is old else b for b in state.batches) if b is not None)
    return replace(state, batches=batches)


def sent(state: OutboxState, batch: Batch, now: float) -> OutboxState:
    return _swap(state, batch, replace(batch, sends=batch.sends + 1, sent_at=now))


def failed(state: OutboxState, msg_id: str, now: float) -> OutboxState:
    """The write to the session's socket failed (nothing reached Qwen): try again soon, not after
    a receipt's wait."""
    for batch in state.batches:
        if batch.msg_id == msg_id and batch.status != f.DELIVERED:
            retry = replace(batch, sends=max(0, batch.sends - 1), next_at=now + SEND_RETRY_S)
            return _swap(state, batch, retry)
    return state


def _forget(state: OutboxState, batch: Batch) -> OutboxState:
    state = _swap(state, batch, None)
    return replace(state, recent=(*state.recent, *batch.ids)[-RECENT:])


def apply(state: OutboxState, receipt: f.QwenReceipt, now: float) -> tuple[OutboxState, list[Batch]]:
    """The state after Qwen's answer, and the batches it has just queued for the model."""
    queued: list[Batch] = []
    for msg_id in receipt.settles():
        key = f.canonical(msg_id)
        batch = next((b for b in state.batches if f.canonical(b.msg_id) == key), None)
        if batch is None or not f.can_follow(batch.status, receipt.status):
            continue  # noise, a repeat, or an answer to an id this batch no longer uses
        status = receipt.status
        state = replace(state, counts={**state.counts, status: state.counts.get(status, 0) + 1})
        if status == f.DELIVERED:
            done = replace(batch, status=f.DELIVERED, delivered_at=now)
            state = _swap(state, batch, done)
            queued.append(done)
        elif status == f.HELD:
            state = _swap(state, batch, replace(batch, status=f.HELD, sent_at=now))
        elif status == f.DENIED:
            state = _forget(state, batch)
        elif status == f.REFUSED:
            state = _swap(state, batch, batch.anew(now + REFUSED_RETRY_S, f.REFUSED))
        elif status == f.EXPIRED:
            state = _swap(state, batch, batch.anew(now + EXPIRED_RETRY_S))
        elif status == f.MISADDRESSED:
            state = _swap(state, batch, batch.anew(now))
        elif status == f.DROPPED:
            wait = (DUPLICATE_WINDOW_S if receipt.drop_reason == "duplicate"
                    else min(DROP_CAP_S, 2.0 ** (batch.drops + 1)))
            state = _swap(state, batch, replace(batch, sends=0, next_at=now + wait, drops=batch.drops + 1))
    return state, queued


def retarget(state: OutboxState, live: Sequence[str], now: float) -> OutboxState:
    """Batches for a session that is gone go to a live one (the newest), as new messages: the
    mail waited for Qwen, not for that one process. Without a live session they wait."""
    if not live:
        return state
    for batch in state.batches:
        if batch.sid not in live and batch.status != f.DELIVERED:
            state = _swap(state, batch, replace(batch.anew(now), sid=live[0]))
    return state


def retire(state: OutboxState, live: Sequence[str], now: float) -> OutboxState:
    """Forget delivered batches once `expired` can no longer follow (their session is gone, or
    long enough has passed)."""
    for batch in state.batches:
        old = now - batch.delivered_at >= KEEP_DELIVERED_S
        if batch.status == f.DELIVERED and (batch.sid not in live or old):
            state = _forget(state, batch)
    return state


class QwenOutbox(StateFile[OutboxState]):
    """The outbox file; one door uses it at a time (the door's liveness lock). Taking mail is
    `alarms.outbox.taking`; what differs from the other doors is what is kept: batches, each
    until Qwen's receipts settle it (the module docstring)."""

    def __init__(self, path: Path) -> None:
        super().__init__(path, OutboxState, OutboxState.from_json, "Qwen Code")

    def fill(self, layout: SpoolLayout, sid: str, state: OutboxState,
             text_of: Callable[[list[SpoolRecord]], str]) -> OutboxState:
        """Take the session's new mail into the outbox (saved) before its cursor moves."""
        with taking(layout.session_file(sid), layout.cursor_file(sid)) as take:
            if take is None or not take.moved:
                return state
            new = add(state, sid, take.records, text_of)
            if new != state:
                self.save(new)
        return new
