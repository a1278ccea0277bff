"""The opencode alarm's outbox: mail taken from the spool but not yet accepted by opencode.

The session's cursor moves before mail is handed on, so a daemon that dies between moving it
and opencode's 204 would lose the mail. The outbox closes that gap:

1. Under the cursor's lock, the new records are read, the batch is written to the outbox
   (atomically, fsynced), and only then is the cursor saved. A crash before the outbox write
   leaves the mail in the spool; a crash after it leaves it in the outbox.
2. The batch is posted with ids fixed when it entered the outbox: opencode's `messageID` and
   the text part's `id`. opencode stores a message under a caller's ids as an upsert, so the
   same post sent again (after a timeout, a crash after the 204, a restart of either side)
   changes nothing and starts no second turn; verified with opencode 1.18.33.
3. After the 204 the batch's talk ids move to `recent`, so records read again because a crash
   hit between steps 1's outbox write and cursor save are recognised and dropped.
4. The 204 comes before opencode stores the message, and a message that lands as a run ends
   can be left unanswered; so the accepted prompt stays in `posted` until the session, idle
   again, shows it taken, and is posted again (the same upsert) if not: `alarms.hosts.opencode.verdict`.

The ids follow opencode's own shape (`msg_` + 12 hex digits of milliseconds * 0x1000 + a
counter, then 14 characters): opencode orders a session's messages by id, so a made-up
prefix would sort after every later message and confuse its "is the last question answered"
check.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from alarms.outbox import StateFile, taking
from durable.digests import blake2b
from spool_writer import handed as handed_log
from spool_writer.cursor import CursorReader
from spool_writer.record import SpoolRecord

RECENT = 512
POSTED = 64  # prompts awaiting their verdict; more only if the session never goes idle
_B62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"


def opencode_id(prefix: str, now_ms: int, counter: int, seed: str) -> str:
    """An id opencode accepts and sorts by time: `prefix_` + 12 hex time digits + 14 base62."""
    stamp = (now_ms * 0x1000 + counter) & 0xFFFFFFFFFFFF
    digest = blake2b(f"{prefix}:{seed}".encode(), digest_size=16).digest()
    tail = "".join(_B62[b % 62] for b in digest[:14])
    return f"{prefix}_{stamp:012x}{tail}"


@dataclass(frozen=True)
class Prompt:
    """One prompt_async call, frozen when it enters the outbox so every retry is the same call."""

    message_id: str
    part_id: str
    text: str
    ids: tuple[str, ...]

    def body(self) -> dict[str, Any]:
        return {"messageID": self.message_id,
                "parts": [{"id": self.part_id, "type": "text", "text": self.text}]}

    def to_json(self) -> dict[str, Any]:
        return {"message_id": self.message_id, "part_id": self.part_id, "text": self.text,
                "ids": list(self.ids)}

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> Prompt:
        return cls(str(obj["message_id"]), str(obj["part_id"]), str(obj["text"]),
                   tuple(map(str, obj["ids"])))


def new_prompt(records: Sequence[SpoolRecord], text: str, now_ms: int) -> Prompt:
    ids = tuple(str(r["id"]) for r in records)
    seed = ",".join(ids)
    return Prompt(opencode_id("msg", now_ms, 0, seed), opencode_id("prt", now_ms, 1, seed), text, ids)


@dataclass(frozen=True)
class PromptOutboxState:
    pending: Prompt | None = None
    recent: tuple[str, ...] = field(default=())
    delivered: int = 0  # batches opencode accepted, over the outbox's life
    posted: tuple[Prompt, ...] = field(default=())  # accepted, not yet seen taken into a run

    def to_json(self) -> dict[str, Any]:
        return {"pending": None if self.pending is None else self.pending.to_json(),
                "recent": list(self.recent), "delivered": self.delivered,
                "posted": [p.to_json() for p in self.posted]}

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> PromptOutboxState:
        pending = obj.get("pending")
        return cls(None if pending is None else Prompt.from_json(pending),
                   tuple(map(str, obj.get("recent", []))), int(obj.get("delivered", 0)),
                   tuple(Prompt.from_json(p) for p in obj.get("posted", [])))


def fresh(records: Sequence[SpoolRecord], state: PromptOutboxState) -> list[SpoolRecord]:
    """The records not yet handed to opencode (neither accepted nor waiting in the outbox)."""
    known = set(state.recent) | set(state.pending.ids if state.pending else ())
    return [r for r in records if str(r.get("id")) not in known]


def accepted(state: PromptOutboxState, keep: int = RECENT, posted: int = POSTED) -> PromptOutboxState:
    """The state after opencode accepted the pending batch: it awaits its verdict."""
    if state.pending is None:
        return state
    recent = (*state.recent, *state.pending.ids)[-keep:]
    return PromptOutboxState(None, recent, state.delivered + 1, (*state.posted, state.pending)[-posted:])


def settled(state: PromptOutboxState, message_id: str) -> PromptOutboxState:
    """The state once the prompt `message_id` was seen taken into a run."""
    posted = tuple(p for p in state.posted if p.message_id != message_id)
    return PromptOutboxState(state.pending, state.recent, state.delivered, posted)


class PromptOutbox(StateFile[PromptOutboxState]):
    """The on-disk outbox of one session's door; one process uses it at a time (the door lock).
    Taking mail is `alarms.outbox.taking`; what differs from the other doors is what is kept:
    one pending prompt, and the posted ones awaiting their verdict."""

    def __init__(self, path: Path) -> None:
        super().__init__(path, PromptOutboxState, PromptOutboxState.from_json, "opencode")

    def fill(self, reader: CursorReader, make: Callable[[list[SpoolRecord]], Prompt]) -> PromptOutboxState:
        """Move new spool records into the outbox as one batch made by `make(records)`.

        Done under the cursor's lock, outbox first and cursor second (see the module docstring).
        Call only when nothing is pending.
        """
        state = self.load()
        with taking(reader.spool_file, reader.state_file, reader.keep) as take:
            if take is None or not take.moved:
                return state
            records = fresh(take.records, state)
            if records and reader.handed is not None:
                handed_log.record(reader.handed, records, reader.sid)
            if records:
                state = PromptOutboxState(make(records), state.recent, state.delivered, state.posted)
                self.save(state)
        return state
