"""The groups this identity belongs to, and the one rule for changing them.

File `groups.json` in the identity folder: {GROUP_ID: {"name", "owner", "members", "version",
"state"}}, where GROUP_ID is 32 random hex characters, "owner" and each member a fingerprint
(the owner among the members), and "state" one of `GroupState`. Names are this identity's own:
unique here, chosen by whoever created the group, suffixed when a received one is taken.

Membership is the owner's. Only the owner's updates change the member list, each with a
higher version than the last; a member's `leave` takes out that member alone; anything else
is refused (`GroupRefused`, whose reason the inbox quarantines the message with). The rule
(`apply_update`, `apply_leave`) is pure: the book in, the changed group out.

Writes are load, change, save under `groups.lock`, and `write_json` replaces the file
atomically: a crash leaves the old book or the new one, and two processes never lose each
other's change. A crash after a control message changed the book but before it was acked
takes the message again: the same version is then refused as not higher, and a second leave
finds the member gone, so neither changes anything twice.
"""

from __future__ import annotations

import contextlib
import secrets
from collections.abc import Iterator
from enum import StrEnum
from pathlib import Path
from typing import Any, NamedTuple

from durable.errors import GroupRefused, NotFound, UserError
from durable.files import read_json, write_json
from durable.locks import locked
from keys.contacts import free_name
from keys.names import check_name

__all__ = [
    "GROUPS_FILE",
    "Group",
    "GroupBook",
    "GroupState",
    "apply_leave",
    "apply_update",
    "new_group_id",
]

GROUPS_FILE = "groups.json"
GROUPS_LOCK = "groups.lock"
MAX_MEMBERS = 64


class GroupState(StrEnum):
    ACTIVE = "active"
    REMOVED = "removed"  # the owner took this identity out
    LEFT = "left"  # this identity left
    CLOSED = "closed"  # the owner left: nobody may change the members any more


class Group(NamedTuple):
    id: str
    name: str
    owner: str
    members: tuple[str, ...]
    version: int
    state: GroupState = GroupState.ACTIVE

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "owner": self.owner, "members": list(self.members),
                "version": self.version, "state": self.state.value}

    @classmethod
    def from_json(cls, group_id: str, data: dict[str, Any]) -> Group:
        return cls(group_id, str(data["name"]), str(data["owner"]), tuple(map(str, data["members"])),
                   int(data["version"]), GroupState(data["state"]))

    def others(self, me: str) -> list[str]:
        """The members a message of mine goes to."""
        return [m for m in self.members if m != me]


def new_group_id() -> str:
    return secrets.token_hex(16)


def apply_update(groups: dict[str, Group], sender: str, me: str, update: dict[str, Any]) -> Group:
    """The group as `update` (from contact `sender`, checked by the gate) leaves it. An unknown
    group is accepted from anyone we pin, who becomes its owner here; a known one changes only
    by its owner, at a higher version, while it is active (or, for a removed member, at a higher
    version that takes it back in).

    Raises:
        GroupRefused: why not.
    """
    group_id, members = update["id"], tuple(update["members"])
    if update["owner"] != sender or sender not in members:
        raise GroupRefused(f"a group update names {update['owner'][:8]} as owner but came from "
                           f"{sender[:8]}, or leaves the owner out")
    known = groups.get(group_id)
    if known is None:
        if me not in members:
            raise GroupRefused("a group update for a group this identity is not in")
        taken = {g.name for g in groups.values()}
        return Group(group_id, free_name(update["name"], taken), sender, members, update["version"])
    if known.owner != sender:
        raise GroupRefused(f"a group update for {known.name} from {sender[:8]}, who does not own it")
    if update["version"] <= known.version:
        raise GroupRefused(f"a group update for {known.name} at version {update['version']}, not above "
                           f"{known.version} (a replay or an old update)")
    if known.state in (GroupState.LEFT, GroupState.CLOSED):
        raise GroupRefused(f"a group update for {known.name}, which is {known.state.value} here")
    state = GroupState.ACTIVE if me in members else GroupState.REMOVED
    return known._replace(members=members, version=update["version"], state=state)


def apply_leave(groups: dict[str, Group], sender: str, group_id: str) -> Group:
    """The group once member `sender` left it: the owner leaving closes it.

    Raises:
        GroupRefused: no such group here, or `sender` is no member of it.
    """
    known = groups.get(group_id)
    if known is None or sender not in known.members:
        raise GroupRefused(f"a leave from {sender[:8]} for a group it is not a member of here")
    members = tuple(m for m in known.members if m != sender)
    closed = sender == known.owner and known.state is GroupState.ACTIVE
    return known._replace(members=members, state=GroupState.CLOSED if closed else known.state)


class GroupBook:
    """The groups of the identity in `folder`."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.path = folder / GROUPS_FILE

    def all(self) -> dict[str, Group]:
        raw = read_json(self.path, {})
        return {gid: Group.from_json(gid, data) for gid, data in sorted(raw.items())}

    def get(self, name: str) -> Group:
        """The group called `name` here (or with that id).

        Raises:
            NotFound: no such group.
        """
        for group in self.all().values():
            if name in (group.name, group.id):
                return group
        raise NotFound(f"no group {name!r}; `talk group list` shows yours, `talk group create` makes one")

    @contextlib.contextmanager
    def changing(self) -> Iterator[dict[str, Group]]:
        """The groups, under the book's lock; what the block leaves in the dict is saved."""
        with locked(self.folder / GROUPS_LOCK):
            groups = self.all()
            yield groups
            write_json(self.path, {gid: g.to_json() for gid, g in groups.items()})

    def create(self, name: str, owner: str, members: list[str]) -> Group:
        """A new group owned by `owner` (who is put among `members`).

        Raises:
            UserError: the name is malformed or taken, or there are too many members.
        """
        check_name(name)
        everyone = tuple(dict.fromkeys([owner, *members]))
        if len(everyone) > MAX_MEMBERS:
            raise UserError(f"a group has at most {MAX_MEMBERS} members; {name!r} would have {len(everyone)}")
        with self.changing() as groups:
            if any(g.name == name for g in groups.values()):
                raise UserError(f"you already have a group {name!r}; pick another name")
            group = Group(new_group_id(), name, owner, everyone, 1)
            groups[group.id] = group
        return group

    def put(self, group: Group) -> None:
        with self.changing() as groups:
            groups[group.id] = group
