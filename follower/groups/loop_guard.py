"""The loop guard: a member whose agent keeps writing to a group with no person in between is held.

Every group message this identity sends or receives is noted with its writer (a member's
fingerprint; our own for what we send) and whether a person or an agent wrote it. Each member
has its own count: its agent messages in a row. A person's message sets every member's count
back to 0, except a held member's; an agent's adds 1 to its writer's alone. The message that
brings a member's count to the cap still goes through, and that member is then held here, the
others not: the note that makes the hold says so once (`TRIPPED`), so the caller tells a person
exactly once. A held member's received group mail is kept aside; when the held member is this
identity, its agents' sends are refused (`HELD`). Every other member's mail still flows, so no
member, however many messages it writes, can stop the others' mail here: it holds only itself.

Only a person at this machine lifts a hold: by sending to the group (this identity's own hold)
or by resuming the group (`resume`: its held members, or one of them), which releases what was
kept aside. A resume sets the resumed members' counts to 0 and nobody else's, and a member that
goes on holds itself again after `cap` more messages, never the group. A person's message
received while held does not lift a hold: whether a remote message was typed by a person is
the sender's claim, and the person here is the one who was to be told.

The cap is the identity's setting (`cap` in `group_guard.json`, default 20), overridden for one
process by TALK_GROUP_LOOP_CAP; a whole number from 1 to 10000, or `off`. `off` makes no new
holds; a hold already made stays until a person lifts it, since its kept mail waits for that.

File: {"cap"?, "groups": {GROUP_ID: {"members": {FINGERPRINT: {"count", "held", "held_at",
"kept"}}}}}; a member at count 0 and not held is left out. A group entry without "members" (the
whole-group holds of an older talk) counts as no member held; the next `talk group resume` of
the group releases the mail such a hold kept aside.

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
    "LOOP_HOLD",
    "Author",
    "Decision",
    "Direction",
    "LoopGuard",
    "MemberState",
    "cap_in_force",
    "claimed_author",
    "decide",
    "held_reason",
    "is_loop_hold",
    "kept_aside",
    "lifted",
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


class Direction(StrEnum):
    SENT = "sent"
    RECEIVED = "received"


class Decision(StrEnum):
    PASS = "pass"  # send it, or give it to the agent sessions
    TRIPPED = "tripped"  # as PASS, and its writer is held from now on: tell a person, this once
    HELD = "held"  # its writer is held: keep its received mail aside, refuse our agent's send

    @property
    def passes(self) -> bool:
        return self is not Decision.HELD


States = Mapping[str, "MemberState"]  # a group's members (fingerprints) and their states


@dataclass(frozen=True)
class MemberState:
    count: int = 0  # this member's agent messages in a row since a person's
    held: bool = False
    held_at: float | None = None
    kept: int = 0  # its received messages kept aside during this hold

    def to_json(self) -> dict[str, Any]:
        return {"count": self.count, "held": self.held, "held_at": self.held_at, "kept": self.kept}

    @classmethod
    def from_json(cls, data: Any) -> MemberState:
        """A stored state; a wrong type is damage, never a reason to lift a hold."""
        if not isinstance(data, dict):
            raise ValueError("a member's state is not an object")
        count, kept = data.get("count", -1), data.get("kept", 0)
        held, held_at = data.get("held"), data.get("held_at")
        if not (_natural(count) and _natural(kept) and isinstance(held, bool)):
            raise ValueError("a member's count, held or kept is not of its type")
        if held_at is not None and not isinstance(held_at, int | float):
            raise ValueError("a member's held_at is not a time")
        return cls(count, held, None if held_at is None else float(held_at), kept)


def _natural(value: Any) -> bool:
    return type(value) is int and value >= 0


def decide(states: States, writer: str, by: Author, way: Direction, cap: int | None,
           now: float) -> tuple[Decision, dict[str, MemberState]]:
    """What to do with one group message by `writer`, and the group's member states after it
    (members at count 0 and not held left out). `cap` None is off."""
    state = states.get(writer, MemberState())
    if by is Author.PERSON and (way is Direction.SENT or not state.held):
        # A person: every count starts again; only a person here lifts a hold, and only its own.
        kept = {fp: s for fp, s in states.items() if s.held and not (way is Direction.SENT and fp == writer)}
        return Decision.PASS, kept
    if state.held:
        if way is Direction.RECEIVED:
            return Decision.HELD, {**states, writer: replace(state, kept=state.kept + 1)}
        return Decision.HELD, dict(states)  # an agent's send is refused: nothing sent, nothing counted
    count = state.count + 1
    if cap is not None and count >= cap:
        return Decision.TRIPPED, {**states, writer: MemberState(count, held=True, held_at=now)}
    return Decision.PASS, {**states, writer: MemberState(count)}


def lifted(states: States, member: str | None) -> tuple[list[str], dict[str, MemberState]]:
    """A person's resume of `member` (None: every held member): the members whose hold it
    lifts, and the states after it, where the resumed start again at 0 and the others are as
    they were."""
    resumed = [fp for fp, s in states.items() if s.held] if member is None else [member]
    after = {fp: s for fp, s in states.items() if fp not in resumed}
    return [fp for fp in resumed if states.get(fp, MemberState()).held], after


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
        raise UserError(f"{where} is 0, which would hold a member at its first agent message; {hint}")
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

    def note(self, group_id: str, writer: str, by: Author, way: Direction,
             now: float | None = None) -> Decision:
        """Count one group message `writer` sent here or we received from it, and say what to do
        with it.

        Raises:
            UserError: the guard's file is damaged, or the cap setting is not a cap.
        """
        with folder_locked(self.folder):
            raw = self._read()
            states = self._members(raw, group_id)
            decision, after = decide(states, writer, by, way, self._cap_of(raw),
                                     time.time() if now is None else now)
            if after != states:
                self._put(raw, group_id, after)
        return decision

    def resume(self, group_id: str, member: str | None = None) -> list[str]:
        """A person lifts the hold of `member` in the group (None: of every held member) and the
        count of each resumed starts again; the members whose hold was lifted (none: nothing was
        held, so a second resume does nothing)."""
        with folder_locked(self.folder):
            raw = self._read()
            states = self._members(raw, group_id)
            resumed, after = lifted(states, member)
            if after != states:
                self._put(raw, group_id, after)
        return resumed

    def forget(self, group_id: str) -> None:
        """The group was left or deleted: nothing of it stays here."""
        with folder_locked(self.folder):
            raw = self._read()
            if raw["groups"].pop(group_id, None) is not None:
                write_json(self.path, raw)

    def state(self, group_id: str, member: str) -> MemberState:
        return self.states().get(group_id, {}).get(member, MemberState())

    def states(self) -> dict[str, dict[str, MemberState]]:
        """Per group, its members that count or are held."""
        raw = self._read()
        return {gid: self._members(raw, gid) for gid in raw["groups"]}

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

    def _members(self, raw: dict[str, Any], group_id: str) -> dict[str, MemberState]:
        entry = raw["groups"].get(group_id, {})
        members = entry.get("members", {}) if isinstance(entry, dict) else None
        if not isinstance(members, dict):
            raise self._damaged(f"group {group_id} is not of its shape")
        try:
            return {str(fp): MemberState.from_json(s) for fp, s in members.items()}
        except ValueError as exc:
            raise self._damaged(str(exc)) from exc

    def _put(self, raw: dict[str, Any], group_id: str, states: States) -> None:
        raw["groups"][group_id] = {"members": {fp: s.to_json() for fp, s in sorted(states.items())}}
        write_json(self.path, raw)

    def _damaged(self, why: str) -> UserError:
        return UserError(f"{GUARD_FILE} in {self.folder} is damaged ({why}); move it aside and run the "
                         "command again (every group's loop count starts again at 0)")


LOOP_HOLD = "held by the recipient's loop guard"  # in every reason the guard holds mail for


def is_loop_hold(reason: str) -> bool:
    """Whether held mail waits for a resume (and not for the sender's policy or rate)."""
    return LOOP_HOLD in reason


def kept_aside(held: Mapping[str, Mapping[str, Any]], group_id: str, member: str | None) -> list[str]:
    """The ids, oldest first, of the held mail (`follower.held` entries) the guard kept aside in
    the group from `member`, or from anyone (None: what a resume of the whole group releases,
    an older talk's whole-group hold included); never mail held by a sender's policy or rate."""
    ids = [i for i, h in held.items() if h["record"].get("group_id") == group_id
           and member in (None, h["record"].get("from")) and is_loop_hold(str(h.get("reason", "")))]
    return sorted(ids, key=lambda i: float(held[i]["held_at"]))


def notice(group: str, who: str | None, count: int) -> str:
    """The one line that tells a person a member was held (say it once, at `TRIPPED`); `who`
    None is this identity's own agents."""
    if who is None:
        return (f"group #{group}: your agents' sends held after {count} agent messages in a row with no "
                "person: a person sends to it from a terminal or resumes it with "
                f"`talk group resume {group}`")
    return (f"group #{group}: {who} held after {count} agent messages in a row with no person (the other "
            f"members' mail still flows): a person reads what is kept aside with `talk held` and resumes "
            f"{who} with `talk group resume {group}`")


def held_reason(group: str, who: str) -> str:
    """Why a member's received mail is kept aside: for the held box and the sender's receipt."""
    return f"{who}'s messages in group #{group} are {LOOP_HOLD} until a person there resumes them"


def status_rows(states: Mapping[str, States], names: Mapping[str, str], who: Mapping[str, str],
                me: str) -> list[dict[str, Any]]:
    """`talk status --json`'s rows: one per group (held groups first, then by name), saying
    whether any member is held, the longest run, what is kept aside, and each member's state.
    `who` names members (else their fingerprint's first 8 characters); `me` is this identity."""
    rows = []
    for gid, members in states.items():
        each = [{"fingerprint": fp, "name": who.get(fp, fp[:8]), "you": fp == me, **s.to_json()}
                for fp, s in sorted(members.items())]
        held = [m for m in each if m["held"]]
        rows.append({"group": gid, "name": names.get(gid, gid), "held": bool(held),
                     "held_at": min((m["held_at"] for m in held), default=None),
                     "count": max((m["count"] for m in each), default=0),
                     "kept": sum(m["kept"] for m in each), "members": each})
    return sorted(rows, key=lambda r: (not r["held"], r["name"]))


def render_row(row: Mapping[str, Any], cap: int | None) -> str:
    held = [m for m in row["members"] if m["held"]]
    if held:
        return "\n".join(
            notice(row["name"], None if m["you"] else m["name"], m["count"])
            + (f", {m['kept']} received message(s) kept aside" if m["kept"] else "") for m in held)
    limit = "loop guard off" if cap is None else f"a member is held at {cap}"
    return f"group #{row['name']}: at most {row['count']} agent message(s) in a row from one member ({limit})"
