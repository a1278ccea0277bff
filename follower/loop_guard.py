"""The loop guard: a group whose agents write to each other with no person in between is held.

Every group message this identity sends or receives is noted with who wrote it. A person's
message sets the group's count back to 0; an agent's adds 1. The agent message that brings the
count to the cap still goes through, and the group is then held here: the note that makes the
hold says so once (`TRIPPED`), so the caller tells a person exactly once. While held, received
group mail is kept aside and agents' sends are refused (`HELD`); only a person at this machine
lifts the hold, by sending to the group or resuming it. A person's message received while held
does not lift it: whether a remote message was typed by a person is the sender's claim, and the
person here is the one who was to be told.

The cap is the identity's setting (`cap` in `group_guard.json`, default 20), overridden for one
process by TALK_GROUP_LOOP_CAP; a whole number from 1 to 10000, or `off`. `off` makes no new
holds; a hold already made stays until a person lifts it, since its kept mail waits for that.

Crash reasoning: the follower, `talk send` and the MCP server note from separate processes, so
each note reads, decides and replaces `group_guard.json` under the identity folder's lock, and
the replacement is atomic (`durable.files.write_json`): no note is lost to another's. A crash
before the replacement loses that note together with the caller's act (nothing was sent or
spooled). A crash after it, before the caller acts, counts that message again when it is sent
or fetched again: a hold comes one message early at worst, never late. A crash between the
note that made a hold and the telling loses the one-line notice, never the hold, which
`talk status` shows for as long as it lasts.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from enum import StrEnum
from pathlib import Path
from typing import Any

from durable.errors import UserError
from durable.files import read_json, write_json
from durable.locks import folder_locked

__all__ = [
    "CAP_ENV",
    "DEFAULT_CAP",
    "GUARD_FILE",
    "Author",
    "Decision",
    "GroupState",
    "LoopGuard",
    "Way",
    "cap_in_force",
    "claimed_author",
    "decide",
    "held_reason",
    "notice",
    "parse_cap",
    "render_row",
    "status_rows",
]

GUARD_FILE = "group_guard.json"
CAP_ENV = "TALK_GROUP_LOOP_CAP"
DEFAULT_CAP = 20
MAX_CAP = 10_000
OFF = "off"


class Author(StrEnum):
    PERSON = "person"
    AGENT = "agent"


def claimed_author(value: Any) -> Author:
    """Who a received message says wrote it: a person only when it says exactly that, since a
    missing or unknown value must not reset a count."""
    return Author.PERSON if value == Author.PERSON.value else Author.AGENT


class Way(StrEnum):
    SENT = "sent"
    RECEIVED = "received"


class Decision(StrEnum):
    PASS = "pass"  # send it, or give it to the agent sessions
    TRIPPED = "tripped"  # as PASS, and the group is held from now on: tell a person, this once
    HELD = "held"  # the group is held: keep received mail aside, refuse an agent's send

    @property
    def passes(self) -> bool:
        return self is not Decision.HELD


@dataclass(frozen=True)
class GroupState:
    count: int = 0  # agent messages in a row since a person's
    held: bool = False
    held_at: float | None = None
    kept: int = 0  # received messages kept aside during this hold

    def to_json(self) -> dict[str, Any]:
        return {"count": self.count, "held": self.held, "held_at": self.held_at, "kept": self.kept}

    @classmethod
    def from_json(cls, data: Any) -> GroupState:
        """A stored state; a wrong type is damage, never a reason to lift a hold."""
        if not isinstance(data, dict):
            raise ValueError("a group's state is not an object")
        count, kept = data.get("count", -1), data.get("kept", 0)
        held, held_at = data.get("held"), data.get("held_at")
        if not (_natural(count) and _natural(kept) and isinstance(held, bool)):
            raise ValueError("a group's count, held or kept is not of its type")
        if held_at is not None and not isinstance(held_at, int | float):
            raise ValueError("a group's held_at is not a time")
        return cls(count, held, None if held_at is None else float(held_at), kept)


def _natural(value: Any) -> bool:
    return type(value) is int and value >= 0


def decide(state: GroupState, by: Author, way: Way, cap: int | None,
           now: float) -> tuple[Decision, GroupState]:
    """What to do with one group message, and the group's state after it. `cap` None is off."""
    if state.held:
        if by is Author.PERSON and way is Way.SENT:
            return Decision.PASS, GroupState()
        if way is Way.RECEIVED:
            return Decision.HELD, replace(state, kept=state.kept + 1)
        return Decision.HELD, state  # an agent's send is refused: nothing sent, nothing counted
    if by is Author.PERSON:
        return Decision.PASS, GroupState()
    count = state.count + 1
    if cap is not None and count >= cap:
        return Decision.TRIPPED, GroupState(count, held=True, held_at=now)
    return Decision.PASS, GroupState(count)


def parse_cap(text: str, where: str) -> int | None:
    """A cap as a person writes it: a whole number from 1 to 10000, or `off` (None).

    Raises:
        UserError: naming `where` the value came from and what it may be.
    """
    value = text.strip().lower()
    if value == OFF:
        return None
    hint = f"give a whole number of agent messages from 1 to {MAX_CAP}, or {OFF} to turn the loop guard off"
    if value == "0":
        raise UserError(f"{where} is 0, which would hold a group at its first agent message; {hint}")
    if not value.isdigit() or not 1 <= int(value) <= MAX_CAP:
        raise UserError(f"{where} is {text!r}, not a cap; {hint}")
    return int(value)


def cap_in_force(env: Mapping[str, str], stored: Any) -> int | None:
    """The environment's cap if it names one, else the identity's stored setting, else 20.

    Raises:
        UserError: either one is not a cap (`parse_cap`).
    """
    if env.get(CAP_ENV, "").strip():
        return parse_cap(env[CAP_ENV], CAP_ENV)
    if stored is None:
        return DEFAULT_CAP
    return parse_cap(str(stored), f"the loop cap in {GUARD_FILE}")


class LoopGuard:
    """The guard's state for one identity, in `folder`/group_guard.json. The cap is read at each
    note (`cap_in_force` over `env`, the process's environment unless given), so a changed
    setting holds for the follower that is already running. Each call takes the identity
    folder's lock (`durable.locks.folder_locked`): call it with that lock not held."""

    def __init__(self, folder: Path, env: Mapping[str, str] | None = None) -> None:
        self.folder = folder
        self.path = folder / GUARD_FILE
        self.env = os.environ if env is None else env

    def note(self, group_id: str, by: Author, way: Way, now: float | None = None) -> Decision:
        """Count one group message sent or received here, and say what to do with it.

        Raises:
            UserError: the guard's file is damaged, or the cap setting is not a cap.
        """
        with folder_locked(self.folder):
            raw = self._read()
            state = self._state(raw, group_id)
            decision, after = decide(state, by, way, self._cap_of(raw), time.time() if now is None else now)
            if after != state:
                raw["groups"][group_id] = after.to_json()
                write_json(self.path, raw)
        return decision

    def resume(self, group_id: str) -> bool:
        """A person lifts the group's hold and its count starts again; False if it was not held."""
        with folder_locked(self.folder):
            raw = self._read()
            was = self._state(raw, group_id)
            if was != GroupState():
                raw["groups"][group_id] = GroupState().to_json()
                write_json(self.path, raw)
        return was.held

    def forget(self, group_id: str) -> None:
        """The group was left or deleted: nothing of it stays here."""
        with folder_locked(self.folder):
            raw = self._read()
            if raw["groups"].pop(group_id, None) is not None:
                write_json(self.path, raw)

    def held(self, group_id: str) -> bool:
        return self.states().get(group_id, GroupState()).held

    def states(self) -> dict[str, GroupState]:
        raw = self._read()
        return {gid: self._state(raw, gid) for gid in raw["groups"]}

    def cap(self) -> int | None:
        return self._cap_of(self._read())

    def set_cap(self, cap: int | None) -> None:
        """Store the identity's cap (None: off). Whoever calls this should ask a person first."""
        with folder_locked(self.folder):
            raw = self._read()
            raw["cap"] = OFF if cap is None else cap
            write_json(self.path, raw)

    def _cap_of(self, raw: dict[str, Any]) -> int | None:
        return cap_in_force(self.env, raw.get("cap"))

    def _read(self) -> dict[str, Any]:
        raw = read_json(self.path, {})
        if not isinstance(raw, dict) or not isinstance(raw.setdefault("groups", {}), dict):
            raise self._damaged("its top level is not of its shape")
        return raw

    def _state(self, raw: dict[str, Any], group_id: str) -> GroupState:
        try:
            return GroupState.from_json(raw["groups"].get(group_id, {"count": 0, "held": False}))
        except ValueError as exc:
            raise self._damaged(str(exc)) from exc

    def _damaged(self, why: str) -> UserError:
        return UserError(f"{GUARD_FILE} in {self.folder} is damaged ({why}); move it aside and run the "
                         "command again (every group's loop count starts again at 0)")


def notice(name: str, count: int) -> str:
    """The one line that tells a person a group was held (say it once, at `TRIPPED`)."""
    return (f"group #{name} held after {count} agent messages in a row with no person: a person reads "
            f"what it keeps aside with `talk held` and resumes it with `talk group resume {name}`")


def held_reason(name: str) -> str:
    """Why received mail of a held group is kept aside: for the held box and the sender's receipt."""
    return f"group #{name} is held by the recipient's loop guard until a person there resumes it"


def status_rows(states: Mapping[str, GroupState], names: Mapping[str, str]) -> list[dict[str, Any]]:
    """`talk status --json`'s rows: held groups first, then the rest by name."""
    rows = [{"group": gid, "name": names.get(gid, gid), **s.to_json()} for gid, s in states.items()]
    return sorted(rows, key=lambda r: (not r["held"], r["name"]))


def render_row(row: Mapping[str, Any], cap: int | None) -> str:
    if row["held"]:
        kept = f", {row['kept']} received message(s) kept aside" if row["kept"] else ""
        return f"{notice(row['name'], row['count'])}{kept}"
    limit = "loop guard off" if cap is None else f"held at {cap}"
    return f"group #{row['name']}: {row['count']} agent message(s) in a row ({limit})"
