"""Exactly-once hand-over for doors whose output the host writes into its own transcript.

The hook and monitor doors move the session's cursor *before* they print (a Stop hook must
never see the same mail twice, or it would block forever). Alone, that is at-most-once: a
door killed between the cursor's save and the host reading its output loses the batch. So,
under the cursor's lock and before the cursor is saved (`alarms.outbox.taking`, as every door
takes mail), the batch's ids go into `sessions/SID.pending.json` with when and by whom they were
taken. Every later door run for the session first reconciles that file against the host's
transcript:

- every id's marker (`id MSGID`, which every framed message carries) appears in the
  transcript after the batch was taken: delivered, forget it;
- otherwise, if the process that took it is gone and the host has written to the transcript
  well after the batch was taken (it has moved on without it): lost, hand the missing ids on
  again, re-read from the session's spool;
- otherwise wait: the taker may still be printing, or the host not yet have written it down.

Verified (Codex 0.169.0, Claude Code 2.1.328): both write a hook's additionalContext and a
Stop hook's reason into the transcript as they take it, and Claude Code writes each monitor
line as a `queue-operation` entry when the line arrives, before the turn it starts. Gemini CLI
0.61.0 appends BeforeAgent's and AfterTool's context and AfterAgent's reason to its session
JSONL with the prompt or tool result that carries them to the model.

A batch written to a host's inbox socket (door INBOX, `alarms.hosts.claude.inbox`) is held by its
writer until the write, then by the host: it waits in the host's queue until a tool-call
boundary or an idle moment, whatever becomes of the writer. Its marker is the frame's message
id as the host writes it on the entry that shows the message to the model (Claude Code 2.1.332:
`"msg_id":"…"` on the user entry of an idle turn, or on the `queued_command` attachment taken in
mid-turn; the `queue-operation` entry at arrival carries the text but no id). Seeing it earns
the batch its `delivered` receipt; writing it earned only `written`. A writer killed between
its write and the hand-over to the host leaves a batch that may be handed on twice, if the
host had not shown it by the time the transcript moved on: the window is one file write wide.

A batch a door gave the host as the input of a turn (door TURN): a turn it started or steered
through Codex's app-server (`alarms.hosts.codex.remote_door`), or a prompt Copilot's server
accepted (`alarms.hosts.copilot.ui_door`). The host holds it once it answered that it took the
input, and writes it into its transcript with the turn. Its markers are each message's own
(`id MSGID`): accepted earns `written`, seen in the transcript `delivered`, as for an inbox batch.

A batch a door took but could not hand on (it did not fit, or the socket refused it) is
released: kept with no holder, and handed on again by the next take, first.

`judge` decides from values alone; `take` is the I/O around it.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from alarms.outbox import taking
from durable.files import read_json, write_json
from durable.receipt_states import Receipt
from spool_writer import handed as handed_log
from spool_writer import process
from spool_writer.cursor import lock_path, message_of
from spool_writer.layout import SpoolLayout, flocked, generations
from spool_writer.peek import PENDING_SUFFIX as SUFFIX
from spool_writer.record import SpoolRecord

VERSION = 1
# How long after a batch was taken the host must still have been writing its transcript before
# a missing batch counts as lost: both hosts write a hook's output within milliseconds of the
# hook's exit, so two seconds of later activity mean it will never come.
MARGIN_S = 2.0
DELIVERED, LOST, WAIT = "delivered", "lost", "wait"
# Doors: the alarm's own output, the host's inbox socket, or a turn's input the host accepted.
OUTPUT, INBOX, TURN = "output", "inbox", "turn"
RELEASED = 0  # the holder pid of a released batch: nobody holds it


def pending_file(sessions_dir: str, sid: str) -> str:
    """Plain strings: the Codex hook's fast path checks this without importing pathlib."""
    return os.path.join(sessions_dir, sid + SUFFIX)


def marker(msg_id: str) -> bytes:
    """What `alarms.framing` writes for a message in both its block and its one-line form."""
    return f"id {msg_id}".encode()


def inbox_id(msg_id: str) -> str:
    """The id of the inbox frame that carries a batch starting with `msg_id`: a version-4 UUID
    made from talk's 128 random bits, so a batch handed on again keeps its frame's id."""
    import uuid

    try:
        raw = bytes.fromhex(msg_id)[:16].ljust(16, b"\0")
    except ValueError:
        from durable.digests import blake2b

        raw = blake2b(msg_id.encode(), digest_size=16).digest()
    return str(uuid.UUID(bytes=raw, version=4))


def inbox_marker(frame_id: str) -> bytes:
    return f'"msg_id":"{frame_id}"'.encode()


@dataclass(frozen=True)
class PendingBatch:
    ids: tuple[str, ...]
    at: float  # wall clock, comparable with the transcript's mtime
    pid: int  # the door process that took the batch
    start: int | None  # its start time, so a reused pid is not taken for it
    transcript: str | None  # the transcript the output was meant for, if known
    mark: int  # that transcript's size when the batch was taken: the output can only come after
    door: str = OUTPUT

    def to_json(self) -> dict[str, Any]:
        return {"ids": list(self.ids), "at": self.at, "pid": self.pid, "start": self.start,
                "transcript": self.transcript, "mark": self.mark, "door": self.door}

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> PendingBatch:
        start, transcript = obj.get("start"), obj.get("transcript")
        door = str(obj["door"]) if obj.get("door") in (INBOX, TURN) else OUTPUT
        return cls(tuple(map(str, obj["ids"])), float(obj["at"]), int(obj["pid"]),
                   None if start is None else int(start), None if transcript is None else str(transcript),
                   int(obj.get("mark", 0)), door)

    def markers(self) -> dict[str, bytes]:
        """What shows each id reached the model: its own marker, or the one frame's id for all."""
        if self.door == INBOX and self.ids:
            frame = inbox_marker(inbox_id(self.ids[0]))
            return dict.fromkeys(self.ids, frame)
        return {i: marker(i) for i in self.ids}

    def released(self) -> bool:
        return self.pid == RELEASED


@dataclass(frozen=True)
class Seen:
    """What the transcript shows about one batch."""

    found: frozenset[str]  # the batch's ids whose marker is in the transcript after its mark
    mtime: float  # when the host last wrote the transcript


def judge(batch: PendingBatch, seen: Seen | None, taker_alive: bool, margin: float = MARGIN_S) -> str:
    """DELIVERED, LOST (hand on the ids not in `seen.found` again) or WAIT.

    `seen` None: no transcript to judge by. A live taker may still be printing (a monitor is
    alive the whole session), so only a dead one's batch can be lost.
    """
    if seen is not None and all(i in seen.found for i in batch.ids):
        return DELIVERED
    if seen is None or taker_alive:
        return WAIT  # nothing to judge by, or the taker may still be printing
    return LOST if seen.mtime > batch.at + margin else WAIT


def missing(batch: PendingBatch, seen: Seen) -> list[str]:
    return [i for i in batch.ids if i not in seen.found]


def load(path: Path) -> list[PendingBatch]:
    """The session's pending batches. Unlike a daemon door's `alarms.outbox.StateFile`, which
    stops its door when damaged, a damaged file here reads as empty: a hook runs inside the
    host's turn and must never stop it, so those batches fall back to at-most-once."""
    data = read_json(path, None)
    if not isinstance(data, dict):
        return []
    try:
        return [PendingBatch.from_json(b) for b in data.get("batches", [])]
    except (KeyError, TypeError, ValueError):
        return []  # a damaged file must not stop mail; its batches fall back to at-most-once


def save(path: Path, batches: Sequence[PendingBatch]) -> None:
    """Also unlike a `StateFile`: nothing pending leaves no file at all."""
    if batches:
        write_json(path, {"v": VERSION, "batches": [b.to_json() for b in batches]})
    else:
        path.unlink(missing_ok=True)  # no file is what keeps the Codex hook on its fast path


def transcript_size(path: str | None) -> int:
    try:
        return os.stat(path).st_size if path else 0
    except OSError:
        return 0


def look(batches: Sequence[PendingBatch], transcript: str) -> list[Seen] | None:
    """What `transcript` shows about each batch; None if it cannot be read (nothing is judged)."""
    try:
        with open(transcript, "rb") as f:
            mtime = os.fstat(f.fileno()).st_mtime
            base = min(b.mark if b.transcript == transcript else 0 for b in batches)
            f.seek(base)
            data = f.read()
    except OSError:
        return None
    seen = []
    for b in batches:
        tail = data[max(0, b.mark - base):] if b.transcript == transcript else data
        seen.append(Seen(frozenset(i for i, m in b.markers().items() if m in tail), mtime))
    return seen


def records_by_id(spool_file: Path, ids: Iterable[str]) -> list[SpoolRecord]:
    """The records with these ids from the session's spool, current file and rotated ones."""
    wanted = set(ids)
    found: dict[str, SpoolRecord] = {}
    for path in [*reversed(generations(spool_file)), spool_file]:
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            continue
        for line in data.splitlines():
            record = message_of(line)
            if record is not None and record["id"] in wanted:
                found.setdefault(record["id"], record)
    return [found[i] for i in ids if i in found]


# How many of a take's records go now (the rest is released) and the receipt they earn by it.
Fit = Callable[[list[SpoolRecord]], tuple[int, Receipt | None]]


def take(layout: SpoolLayout, sid: str, transcript: str | None, *, record: bool,
         reconcile: bool = True, door: str = OUTPUT, holder: int | None = None,
         fit: Fit | None = None) -> list[SpoolRecord]:
    """Released and lost batches again, then new mail; what is returned is pending before the
    cursor moves.

    `record`: whether the caller's output will land in a transcript that can be checked (a Codex
    thread without a rollout file cannot be: its mail stays at-most-once, as before).
    `reconcile`: judge pending batches against `transcript` now (needs a transcript).
    `door`: OUTPUT (the caller prints the batch: it earns `delivered` now), INBOX (the caller
    writes it to the host's inbox, then calls `written`; `delivered` when a later take finds it
    in the transcript) or TURN (the caller makes it a turn's input; `delivered` likewise).
    `holder`: the pid that holds the batch until the host shows it, the
    caller's own by default. `fit`: how many go now and
    what they earn (default: all; `delivered` for OUTPUT, nothing yet for INBOX); the rest is
    released under the same lock.
    """
    spool_file = layout.session_file(sid)
    path = Path(pending_file(str(layout.sessions_dir), sid))
    with taking(spool_file, layout.cursor_file(sid)) as take:
        if take is None:
            return []
        batches = load(path)
        kept, again, shown = reconciled(batches, transcript if reconcile else None)
        out = records_by_id(spool_file, again)
        known = {r["id"] for r in out}
        out += [r for r in take.records if r["id"] not in known]
        everything = (len(out), Receipt.DELIVERED if door == OUTPUT else None)
        n, earned = everything if fit is None or not out else fit(out)
        out, rest = out[:n], out[n:]
        if rest:
            kept.append(PendingBatch(tuple(r["id"] for r in rest), time.time(), RELEASED, None, None, 0))
        if record and out:
            pid = os.getpid() if holder is None else holder
            kept.append(PendingBatch(tuple(r["id"] for r in out), time.time(), pid, process.start_time(pid),
                                     transcript, transcript_size(transcript), door))
        if kept != batches:
            save(path, kept)  # before the cursor: a crash between the two repeats nothing
        # For the sender's receipt: what the host has now shown, and what this take prints.
        handed_log.record(layout.handed, records_by_id(spool_file, shown) if shown else [], sid)
        if earned is not None:
            handed_log.record(layout.handed, out, sid, earned)
    return out


def written(layout: SpoolLayout, sid: str, records: Sequence[SpoolRecord], holder: int) -> None:
    """`records`, taken as one batch, were written to the inbox of the host `holder`: from now
    on the host holds the batch (until then the writer did, so a writer killed before its write
    leaves a batch that is handed on again), and each record earns a `written` receipt."""
    ids = tuple(r["id"] for r in records)
    path = Path(pending_file(str(layout.sessions_dir), sid))
    with flocked(lock_path(layout.cursor_file(sid))):
        batches = load(path)
        moved = [PendingBatch(b.ids, b.at, holder, process.start_time(holder), b.transcript, b.mark, b.door)
                 if b.ids == ids else b for b in batches]
        if moved != batches:
            save(path, moved)
        handed_log.record(layout.handed, list(records), sid, Receipt.WRITTEN)


def release(layout: SpoolLayout, sid: str, records: Sequence[SpoolRecord]) -> None:
    """Give back the batch a take returned when its caller could not hand it on: the next take
    hands it on first, and nothing waits for it in the transcript."""
    ids = tuple(r["id"] for r in records)
    if not ids:
        return
    path = Path(pending_file(str(layout.sessions_dir), sid))
    with flocked(lock_path(layout.cursor_file(sid))):
        batches = [b for b in load(path) if b.ids != ids]
        save(path, [*batches, PendingBatch(ids, time.time(), RELEASED, None, None, 0)])


def settle(layout: SpoolLayout, sid: str, transcript: str) -> list[str]:
    """Judge the session's pending batches against `transcript` now, without taking new mail;
    the ids the host has now shown (they earn `delivered`). Lost and released ones are kept,
    released, for the next take."""
    spool_file = layout.session_file(sid)
    path = Path(pending_file(str(layout.sessions_dir), sid))
    with flocked(lock_path(layout.cursor_file(sid))):
        batches = load(path)
        kept, again, shown = reconciled(batches, transcript)
        if again:  # released and lost ids stay for the next take, as one released batch
            kept.append(PendingBatch(tuple(again), time.time(), RELEASED, None, None, 0))
        if kept != batches:
            save(path, kept)
        if shown:
            handed_log.record(layout.handed, records_by_id(spool_file, shown), sid, Receipt.DELIVERED)
    return shown


def reconciled(batches: list[PendingBatch],
               transcript: str | None) -> tuple[list[PendingBatch], list[str], list[str]]:
    """The batches still pending, the ids to hand on again, and inbox ids the host has now shown."""
    again = [i for b in batches if b.released() for i in b.ids]
    held = [b for b in batches if not b.released()]
    if not held or transcript is None:
        return held, again, []
    seen = look(held, transcript)
    if seen is None:
        return held, again, []
    kept: list[PendingBatch] = []
    shown: list[str] = []
    for batch, s in zip(held, seen, strict=True):
        verdict = judge(batch, s, process.alive(batch.pid, batch.start))
        if verdict == LOST:
            again += missing(batch, s)
        elif verdict == WAIT:
            kept.append(batch)
        elif batch.door != OUTPUT:  # an OUTPUT batch earned `delivered` when it was printed
            shown += batch.ids
    return kept, again, shown
