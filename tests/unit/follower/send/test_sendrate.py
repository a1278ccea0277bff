"""follower.send.sendrate: each contact's send limit per minute, and the wait it names."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from durable.errors import UserError
from durable.slots import read_slotted_json
from follower.send.sendrate import EARLIER_FILE, SENDRATE_FILE, spend, spend_each
from tests.unit.samples import contact


def test_spend_lets_the_limit_through_then_names_the_contact_and_the_wait(tmp_path: Path) -> None:
    bob = contact("bob")
    for t in (1000.0, 1001.0, 1002.0):
        spend(tmp_path, bob, 3, t)
    with pytest.raises(UserError) as caught:
        spend(tmp_path, bob, 3, 1010.0)
    message = str(caught.value)
    assert "bob" in message
    assert "retry in 50 s" in message
    assert "--send-rate" in message


def test_spend_allows_again_a_minute_later(tmp_path: Path) -> None:
    bob = contact("bob")
    for t in (1000.0, 1001.0, 1002.0):
        spend(tmp_path, bob, 3, t)
    with pytest.raises(UserError):
        spend(tmp_path, bob, 3, 1059.0)
    spend(tmp_path, bob, 3, 1060.0)  # the send at 1000 left the window; the refused one never counted
    with pytest.raises(UserError, match="retry in 1 s"):
        spend(tmp_path, bob, 3, 1060.5)


def test_spend_counts_each_contact_apart(tmp_path: Path) -> None:
    bob, carol = contact("bob"), contact("carol")
    spend(tmp_path, bob, 1, 1000.0)
    spend(tmp_path, carol, 1, 1000.0)
    with pytest.raises(UserError, match="bob"):
        spend(tmp_path, bob, 1, 1001.0)




def test_a_send_to_many_counts_each_once_or_none_when_one_minute_is_full(tmp_path: Path) -> None:
    bob, carol, dave = contact("bob"), contact("carol"), contact("dave")
    spend(tmp_path, carol, 1, 1000.0)
    with pytest.raises(UserError, match="carol"):
        spend_each(tmp_path, [(bob, 1), (carol, 1), (dave, 1)], 1001.0)
    spend_each(tmp_path, [(bob, 1), (dave, 1)], 1002.0)  # the refused group send counted no one
    for member in (bob, dave):
        with pytest.raises(UserError, match=member.name):
            spend(tmp_path, member, 1, 1003.0)


def test_the_file_holds_a_count_per_second_not_a_time_per_message(tmp_path: Path) -> None:
    bob = contact("bob")
    for i in range(3000):  # fifty a second for a minute, under a limit of 100000
        spend(tmp_path, bob, 100_000, 1000.0 + i / 50)
    stored = read_slotted_json(tmp_path / SENDRATE_FILE, None)[0]
    assert len(stored[bob.fingerprint]) == 60 and sum(stored[bob.fingerprint].values()) == 3000
    spend(tmp_path, bob, 100_000, 1120.0)  # the minute moved on: the old seconds went
    assert read_slotted_json(tmp_path / SENDRATE_FILE, None)[0][bob.fingerprint] == {"1120": 1}


def test_the_file_is_rewritten_in_place_not_replaced(tmp_path: Path) -> None:
    bob = contact("bob")
    spend(tmp_path, bob, 100, 1000.0)
    inode = (tmp_path / SENDRATE_FILE).stat().st_ino
    for i in range(20):
        spend(tmp_path, bob, 100, 1000.5 + i)
    assert (tmp_path / SENDRATE_FILE).stat().st_ino == inode
    assert sum(read_slotted_json(tmp_path / SENDRATE_FILE, None)[0][bob.fingerprint].values()) == 21


def test_a_damaged_file_is_refused_with_what_to_do_and_left_as_it_is(tmp_path: Path) -> None:
    bob = contact("bob")
    spend(tmp_path, bob, 100, 1000.0)
    path = tmp_path / SENDRATE_FILE
    torn = bytearray(path.read_bytes())
    for slot in (0, 1):  # both copies damaged: no whole state left to fall back on
        torn[12 + slot * (len(torn) - 12) // 2 + 30] ^= 0xFF
    path.write_bytes(bytes(torn))
    with pytest.raises(UserError, match="move it aside and run the command again"):
        spend(tmp_path, bob, 100, 1001.0)
    assert path.read_bytes() == bytes(torn)


def test_an_earlier_versions_list_of_times_still_counts(tmp_path: Path) -> None:
    bob, carol = contact("bob"), contact("carol")
    (tmp_path / EARLIER_FILE).write_text(json.dumps({
        bob.fingerprint: [1000.2, 1000.7, 1001.5, "junk", True],
        carol.fingerprint: {"1000": "x", "abc": 2, "1001": -3},  # damaged: counts as nothing
    }))
    with pytest.raises(UserError, match="retry in 59 s"):
        spend(tmp_path, bob, 3, 1001.9)
    spend(tmp_path, carol, 1, 1002.0)
    # Counted on from here: the earlier version's file is gone, so that version, run again,
    # starts from nothing, not from counts this one has moved past.
    assert not (tmp_path / EARLIER_FILE).exists()
    assert read_slotted_json(tmp_path / SENDRATE_FILE, None)[0][bob.fingerprint] == {"1000": 2, "1001": 1}
