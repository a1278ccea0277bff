"""keys.groups.book: the book of groups and the owner's rule for changing them."""

from __future__ import annotations

from pathlib import Path

import pytest

from durable.errors import GroupRefused, NotFound, UserError
from keys.groups.book import MAX_MEMBERS, Group, GroupBook, GroupState, apply_leave, apply_update
from tests.unit.samples import FP_A, FP_B, FP_C

GID = "1" * 32
TEAM = Group(GID, "team", FP_A, (FP_A, FP_B, FP_C), 3)


def update(version: int, members: tuple[str, ...] = (FP_A, FP_B, FP_C), owner: str = FP_A,
           name: str = "team", gid: str = GID) -> dict[str, object]:
    return {"op": "update", "id": gid, "name": name, "owner": owner, "members": list(members),
            "version": version}


def test_create_puts_the_owner_among_the_members_once_and_keeps_the_book(tmp_path: Path) -> None:
    book = GroupBook(tmp_path)
    group = book.create("team", FP_A, [FP_B, FP_A, FP_C])
    assert (group.members, group.version, group.state) == ((FP_A, FP_B, FP_C), 1, GroupState.ACTIVE)
    assert book.get("team") == group == book.get(group.id)
    assert (tmp_path / "groups.json").stat().st_mode & 0o777 == 0o600


def test_create_refuses_a_taken_name_a_bad_name_and_too_many_members(tmp_path: Path) -> None:
    book = GroupBook(tmp_path)
    book.create("team", FP_A, [FP_B])
    with pytest.raises(UserError, match="already have a group"):
        book.create("team", FP_A, [FP_C])
    with pytest.raises(UserError, match="invalid name"):
        book.create("-rm", FP_A, [FP_C])
    with pytest.raises(UserError, match="at most"):
        book.create("big", FP_A, [f"{n:032x}" for n in range(MAX_MEMBERS)])
    with pytest.raises(NotFound, match="talk group list"):
        book.get("nope")


def test_an_unknown_group_is_accepted_from_its_owner_and_a_taken_name_gets_a_suffix() -> None:
    other = Group("2" * 32, "team", FP_B, (FP_B, FP_C), 1)
    joined = apply_update({other.id: other}, FP_A, FP_C, update(1))
    assert (joined.name, joined.owner, joined.state) == ("team-2", FP_A, GroupState.ACTIVE)


def test_an_update_is_refused_from_a_non_owner_at_a_lower_version_or_leaving_me_unasked() -> None:
    groups = {GID: TEAM}
    with pytest.raises(GroupRefused, match="does not own it"):
        apply_update(groups, FP_B, FP_C, update(4, owner=FP_B, members=(FP_B, FP_C)))
    with pytest.raises(GroupRefused, match="owner"):  # naming the owner is not being it
        apply_update(groups, FP_B, FP_C, update(4))
    for version in (3, 2):
        with pytest.raises(GroupRefused, match="not above"):
            apply_update(groups, FP_A, FP_C, update(version))
    with pytest.raises(GroupRefused, match="not in"):
        apply_update({}, FP_A, FP_C, update(1, members=(FP_A, FP_B)))


def test_the_owner_removing_me_leaves_me_removed_and_adding_me_again_takes_me_back() -> None:
    removed = apply_update({GID: TEAM}, FP_A, FP_C, update(4, members=(FP_A, FP_B)))
    assert (removed.state, removed.members) == (GroupState.REMOVED, (FP_A, FP_B))
    back = apply_update({GID: removed}, FP_A, FP_C, update(5))
    assert back.state is GroupState.ACTIVE


def test_a_leave_drops_that_member_only_and_the_owner_leaving_closes_the_group() -> None:
    left = apply_leave({GID: TEAM}, FP_B, GID)
    assert (left.members, left.state, left.version) == ((FP_A, FP_C), GroupState.ACTIVE, 3)
    closed = apply_leave({GID: TEAM}, FP_A, GID)
    assert closed.state is GroupState.CLOSED
    with pytest.raises(GroupRefused, match="which is closed here"):
        apply_update({GID: closed}, FP_A, FP_C, update(9))
    with pytest.raises(GroupRefused, match="not a member"):
        apply_leave({GID: left}, FP_B, GID)  # a second leave: the member is gone already
    with pytest.raises(GroupRefused, match="not a member"):
        apply_leave({}, FP_B, GID)


def test_a_refused_change_leaves_the_book_as_it_was(tmp_path: Path) -> None:
    book = GroupBook(tmp_path)
    book.put(TEAM)
    with pytest.raises(GroupRefused), book.changing() as groups:
        groups[GID] = apply_update(groups, FP_B, FP_C, update(9))
    assert book.all() == {GID: TEAM}
