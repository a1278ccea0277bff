"""follower.policy: per-contact rules, their bounds, the trust log, and damaged rules."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from durable.errors import UserError
from follower.policy import (
    POLICIES_FILE,
    RECEIVE_PER_MIN,
    SEND_PER_MIN,
    Policy,
    PolicyBook,
    Rule,
    default_rule,
)
from follower.send.sendrate import spend
from keys.contacts import Contact, Source
from tests.unit.samples import contact


def test_default_rule_follows_how_the_contact_was_made() -> None:
    assert default_rule(contact(source=Source.INVITED)) == Rule(Policy.ACCEPT)
    assert default_rule(contact(source=Source.JOINED)) == Rule(Policy.ACCEPT)
    assert default_rule(contact(source=Source.ADDED)) == Rule(Policy.HOLD)
    # Checking the keys widens nothing by itself: accepting is a separate, logged change.
    verified = contact(source=Source.ADDED)._replace(verified_at=1000.0)
    assert default_rule(verified) == Rule(Policy.HOLD)


def test_default_rule_never_trusts_tasks() -> None:
    rule = default_rule(contact(source=Source.INVITED))
    assert not rule.tasks
    assert (rule.receive_per_min, rule.send_per_min) == (RECEIVE_PER_MIN, SEND_PER_MIN)


def test_rule_round_trips_through_json() -> None:
    rule = Rule(Policy.HOLD, True, 7, 9)
    assert Rule.from_json(json.loads(json.dumps(rule.to_json()))) == rule
    assert rule.to_json()["policy"] == "hold"


def test_change_sets_what_is_given_and_keeps_the_rest(tmp_path: Path) -> None:
    book, bob = PolicyBook(tmp_path), contact("bob", Source.ADDED)
    before, after = book.change(bob, tasks=True, receive_per_min=5)
    assert before == Rule(Policy.HOLD)
    assert after == Rule(Policy.HOLD, True, 5, SEND_PER_MIN)
    before, after = book.change(bob, policy=Policy.ACCEPT)
    assert before == Rule(Policy.HOLD, True, 5, SEND_PER_MIN)
    assert after == Rule(Policy.ACCEPT, True, 5, SEND_PER_MIN)
    _, after = book.change(bob, tasks=False, send_per_min=9)
    assert after == Rule(Policy.ACCEPT, False, 5, 9)
    assert book.rule(bob) == after


def test_change_logs_before_and_after_in_the_trust_log(tmp_path: Path) -> None:
    book, bob = PolicyBook(tmp_path), contact("bob")
    assert book.history() == []
    book.change(bob, policy=Policy.REFUSE)
    book.change(bob, tasks=True)
    history = book.history()
    assert [h["action"] for h in history] == ["policy", "policy"]
    assert all((h["name"], h["fingerprint"]) == ("bob", bob.fingerprint) for h in history)
    assert history[0]["before"]["policy"] == "accept"
    assert history[0]["after"]["policy"] == "refuse"
    assert (history[1]["before"]["tasks"], history[1]["after"]["tasks"]) == (False, True)
    assert history[1]["after"]["policy"] == "refuse"
    assert all(isinstance(h["ts"], float) for h in history)


def test_rates_out_of_bounds_are_refused_and_change_nothing(tmp_path: Path) -> None:
    book, bob = PolicyBook(tmp_path), contact("bob")
    for receive, send in ((0, None), (None, 0), (100_001, None), (None, 100_001), (None, -5)):
        with pytest.raises(UserError, match="between 1 and 100000"):
            book.change(bob, policy=Policy.REFUSE, receive_per_min=receive, send_per_min=send)
    assert not (tmp_path / POLICIES_FILE).exists()
    assert book.history() == []
    assert book.rule(bob) == Rule(Policy.ACCEPT)


def test_rates_at_the_bounds_are_allowed(tmp_path: Path) -> None:
    book, bob = PolicyBook(tmp_path), contact("bob")
    _, after = book.change(bob, receive_per_min=1, send_per_min=100_000)
    assert (after.receive_per_min, after.send_per_min) == (1, 100_000)


def write_policies(folder: Path, who: Contact, stored: Any) -> None:
    (folder / POLICIES_FILE).write_text(json.dumps({who.fingerprint: stored}))


def test_a_damaged_rule_is_a_user_error_that_says_how_to_fix_it(tmp_path: Path) -> None:
    book, bob = PolicyBook(tmp_path), contact("bob")
    for stored in ({"policy": "maybe"}, {"tasks": True}, {"policy": "accept", "receive_per_min": "lots"}):
        write_policies(tmp_path, bob, stored)
        with pytest.raises(UserError) as caught:
            book.rule(bob)
        assert POLICIES_FILE in str(caught.value)
        assert "talk policy NAME accept|hold|refuse" in str(caught.value)


def test_a_stored_entry_that_is_not_an_object_falls_back_to_the_default(tmp_path: Path) -> None:
    book, bob = PolicyBook(tmp_path), contact("bob", Source.ADDED)
    write_policies(tmp_path, bob, "accept")
    assert book.rule(bob) == Rule(Policy.HOLD)


def test_setting_a_damaged_rule_again_repairs_it(tmp_path: Path) -> None:
    book, bob = PolicyBook(tmp_path), contact("bob")
    write_policies(tmp_path, bob, {"policy": "maybe"})
    _, after = book.change(bob, policy=Policy.ACCEPT)
    assert after.policy is Policy.ACCEPT
    assert book.rule(bob).policy is Policy.ACCEPT


def test_a_tasks_flag_that_is_not_a_boolean_is_damaged_not_trusted(tmp_path: Path) -> None:
    book, bob = PolicyBook(tmp_path), contact("bob")
    write_policies(tmp_path, bob, {"policy": "accept", "tasks": "false"})
    try:
        rule = book.rule(bob)
    except UserError:
        return
    assert not rule.tasks


def test_a_stored_rate_out_of_bounds_is_a_user_error(tmp_path: Path) -> None:
    book, bob = PolicyBook(tmp_path), contact("bob")
    write_policies(tmp_path, bob, {"policy": "accept", "send_per_min": 0})
    with pytest.raises(UserError):
        spend(tmp_path, bob, book.rule(bob).send_per_min, 1000.0)


