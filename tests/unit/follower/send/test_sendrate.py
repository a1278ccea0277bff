"""follower.send.sendrate: each contact's send limit per minute, and the wait it names."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from durable.errors import UserError
from follower.send.sendrate import SENDRATE_FILE, spend, spend_each
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
    stored = json.loads((tmp_path / SENDRATE_FILE).read_text())
    assert len(stored[bob.fingerprint]) == 60 and sum(stored[bob.fingerprint].values()) == 3000
    spend(tmp_path, bob, 100_000, 1120.0)  # the minute moved on: the old seconds went
    assert json.loads((tmp_path / SENDRATE_FILE).read_text())[bob.fingerprint] == {"1120": 1}


def test_an_earlier_versions_list_of_times_still_counts(tmp_path: Path) -> None:
    bob, carol = contact("bob"), contact("carol")
    (tmp_path / SENDRATE_FILE).write_text(json.dumps({
        bob.fingerprint: [1000.2, 1000.7, 1001.5, "junk", True],
        carol.fingerprint: {"1000": "x", "abc": 2, "1001": -3},  # damaged: counts as nothing
    }))
    with pytest.raises(UserError, match="retry in 59 s"):
        spend(tmp_path, bob, 3, 1001.9)
    spend(tmp_path, carol, 1, 1002.0)
