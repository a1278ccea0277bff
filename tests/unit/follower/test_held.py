"""follower.held: the box of held mail; each message kept once, picked by id or unique prefix."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from durable.errors import NotFound, UserError
from follower.held import HeldBox
from tests.unit.samples import FP_A, FP_B, FP_C


def held_record(msg_id: str) -> dict[str, Any]:
    return {"id": msg_id, "from": FP_B, "name": "bob", "text": "hi", "ts": "t", "kind": "chat"}


def test_hold_keeps_a_message_once(tmp_path: Path) -> None:
    box = HeldBox(tmp_path)
    assert box.hold(held_record(FP_A), "held until the recipient accepts it")
    assert not box.hold({**held_record(FP_A), "text": "resent"}, "again")
    held = box.all()
    assert list(held) == [FP_A]
    assert held[FP_A]["record"]["text"] == "hi"
    assert held[FP_A]["reason"] == "held until the recipient accepts it"


def test_all_of_an_empty_box_is_empty(tmp_path: Path) -> None:
    box = HeldBox(tmp_path)
    assert box.all() == {}
    assert box.pick("all") == []


def test_pick_all_an_id_or_a_unique_prefix(tmp_path: Path) -> None:
    box = HeldBox(tmp_path)
    one, two, other = "abcdef01" + "0" * 24, "abcdef02" + "0" * 24, "123456" + "0" * 26
    for msg in (one, two, other):
        box.hold(held_record(msg), "r")
    assert sorted(box.pick("all")) == sorted([one, two, other])
    assert box.pick(two) == [two]
    assert box.pick("abcdef01") == [one]
    assert box.pick("123456") == [other]


def test_pick_refuses_ambiguous_short_or_unknown_names(tmp_path: Path) -> None:
    box = HeldBox(tmp_path)
    for msg in ("abcdef01" + "0" * 24, "abcdef02" + "0" * 24, "123456" + "0" * 26):
        box.hold(held_record(msg), "r")
    with pytest.raises(NotFound, match="talk held"):
        box.pick("ffffff")
    with pytest.raises(UserError, match="ambiguous: abcdef matches 2"):
        box.pick("abcdef")
    for which in ("12345", "", "all-of-them"):
        with pytest.raises(UserError, match="not a message id"):
            box.pick(which)


def test_remove_returns_what_was_there_and_ignores_the_rest(tmp_path: Path) -> None:
    box = HeldBox(tmp_path)
    box.hold(held_record(FP_A), "r1")
    box.hold(held_record(FP_B), "r2")
    taken = box.remove([FP_A, FP_C])
    assert [t["record"]["id"] for t in taken] == [FP_A]
    assert taken[0]["reason"] == "r1"
    assert list(box.all()) == [FP_B]
    assert box.remove([FP_A]) == []


def test_expired_lists_what_was_held_longer_than_the_hours(tmp_path: Path) -> None:
    box = HeldBox(tmp_path)
    box.hold(held_record(FP_A), "r")
    held_at = float(box.all()[FP_A]["held_at"])
    assert box.expired(held_at + 24 * 3600 - 1, 24.0) == []
    assert box.expired(held_at + 24 * 3600, 24.0) == [FP_A]
    assert box.expired(held_at + 3600, 0.5) == [FP_A]


