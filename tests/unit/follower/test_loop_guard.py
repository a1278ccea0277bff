"""follower.loop_guard: agents' group messages in a row are capped; only a person here lifts a hold."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from durable.errors import UserError
from follower.loop_guard import (
    CAP_ENV,
    DEFAULT_CAP,
    GUARD_FILE,
    Author,
    Decision,
    GroupState,
    LoopGuard,
    Way,
    cap_in_force,
    claimed_author,
    decide,
    held_reason,
    notice,
    parse_cap,
    render_row,
    status_rows,
)
from tests.conftest import REPO

PERSON, AGENT = Author.PERSON, Author.AGENT
SENT, RECEIVED = Way.SENT, Way.RECEIVED
NOW = 1_700_000_000.0


def run(events: list[tuple[Author, Way]], cap: int | None = 3,
        state: GroupState | None = None) -> tuple[list[Decision], GroupState]:
    decisions = []
    state = state or GroupState()
    for by, way in events:
        decision, state = decide(state, by, way, cap, NOW)
        decisions.append(decision)
    return decisions, state


# The pure decision.


def test_agent_messages_pass_until_the_cap_which_trips_once_then_all_is_held() -> None:
    decisions, state = run([(AGENT, RECEIVED), (AGENT, SENT), (AGENT, RECEIVED), (AGENT, RECEIVED),
                            (AGENT, SENT)])
    assert decisions == [Decision.PASS, Decision.PASS, Decision.TRIPPED, Decision.HELD, Decision.HELD]
    assert [d.passes for d in decisions] == [True, True, True, False, False]
    assert state == GroupState(count=3, held=True, held_at=NOW, kept=1)  # one received kept; the send refused


def test_a_persons_message_either_way_sets_the_count_back_to_zero() -> None:
    for way in (SENT, RECEIVED):
        decisions, state = run([(AGENT, SENT), (AGENT, RECEIVED), (PERSON, way), (AGENT, SENT),
                                (AGENT, SENT)])
        assert Decision.TRIPPED not in decisions
        assert state == GroupState(count=2)


def test_held_stays_held_for_agents_and_for_a_persons_message_from_elsewhere() -> None:
    _, held = run([(AGENT, SENT)] * 3)
    decisions, after = run([(AGENT, SENT), (AGENT, RECEIVED), (PERSON, RECEIVED)], state=held)
    assert decisions == [Decision.HELD] * 3
    assert after.held and after.count == 3 and after.kept == 2


def test_a_persons_send_lifts_the_hold_and_the_count_starts_again() -> None:
    _, held = run([(AGENT, SENT)] * 3)
    decisions, after = run([(PERSON, SENT), *[(AGENT, RECEIVED)] * 3], state=held)
    assert decisions == [Decision.PASS, Decision.PASS, Decision.PASS, Decision.TRIPPED]  # told anew
    assert after.held and after.kept == 0


def test_off_makes_no_hold_but_keeps_one_already_made() -> None:
    decisions, state = run([(AGENT, SENT)] * 50, cap=None)
    assert set(decisions) == {Decision.PASS} and state == GroupState(count=50)
    _, held = run([(AGENT, SENT)] * 3)
    assert run([(AGENT, RECEIVED)], cap=None, state=held)[0] == [Decision.HELD]


def test_a_cap_lowered_below_the_count_trips_at_the_next_agent_message() -> None:
    _, state = run([(AGENT, SENT)] * 10, cap=None)
    assert run([(AGENT, SENT)], cap=5, state=state)[0] == [Decision.TRIPPED]


@pytest.mark.parametrize(("value", "by"), [("person", PERSON), ("agent", AGENT), (None, AGENT),
                                           ("PERSON", AGENT), (1, AGENT), (["person"], AGENT)])
def test_only_a_message_that_says_exactly_person_counts_as_a_persons(value: object, by: Author) -> None:
    assert claimed_author(value) is by


# Any sequence: a hold is reported once, made only by `cap` agent messages in a row, lifted only here.

EVENT = st.sampled_from([(PERSON, SENT), (PERSON, RECEIVED), (AGENT, SENT), (AGENT, RECEIVED), "resume"])


@given(st.integers(min_value=1, max_value=6), st.lists(EVENT, max_size=80))
def test_any_sequence_holds_exactly_after_cap_agent_messages_and_tells_once(cap: int,
                                                                           events: list[object]) -> None:
    state, told = GroupState(), 0
    passed: list[Author] = []  # who wrote each message let through since a lift
    for event in events:
        was_held = state.held
        if event == "resume":
            state, told = GroupState(), 0
            passed.clear()
            continue
        assert isinstance(event, tuple)
        decision, state = decide(state, event[0], event[1], cap, NOW)
        if decision.passes:
            passed.append(event[0])
        if decision is Decision.TRIPPED:
            told += 1
            assert not was_held
        if was_held and not state.held:
            assert event == (PERSON, SENT)  # nothing from elsewhere lifts a hold
            told = 0
        tail = passed[-cap:]
        assert told <= 1  # once per hold
        assert state.held == (len(tail) == cap and PERSON not in tail)
        assert not state.held or told == 1


# The cap setting.


@pytest.mark.parametrize(("text", "cap"),
                         [("20", 20), (" 1 ", 1), ("10000", 10_000), ("off", None), ("OFF", None)])
def test_parse_cap_takes_a_whole_number_or_off(text: str, cap: int | None) -> None:
    assert parse_cap(text, CAP_ENV) == cap


@pytest.mark.parametrize("text", ["0", "-1", "10001", "1.5", "twenty", "", "2 0"])
def test_parse_cap_refuses_anything_else_in_one_line_saying_where_and_what(text: str) -> None:
    with pytest.raises(UserError) as caught:
        parse_cap(text, CAP_ENV)
    message = str(caught.value)
    assert CAP_ENV in message and "from 1 to 10000" in message and "off" in message and "\n" not in message


def test_the_environment_overrides_the_identitys_setting_which_overrides_the_default() -> None:
    assert cap_in_force({}, None) == DEFAULT_CAP == 20
    assert cap_in_force({}, 7) == 7
    assert cap_in_force({}, "off") is None
    assert cap_in_force({CAP_ENV: "3"}, 7) == 3
    assert cap_in_force({CAP_ENV: "off"}, 7) is None
    assert cap_in_force({CAP_ENV: " "}, 7) == 7
    with pytest.raises(UserError, match=GUARD_FILE):
        cap_in_force({}, "lots")


# LoopGuard: the state on disk.


def test_the_guard_keeps_each_groups_state_across_processes_views(tmp_path: Path) -> None:
    guard = LoopGuard(tmp_path, {CAP_ENV: "2"})
    assert guard.note("g1", AGENT, SENT, NOW) is Decision.PASS
    assert guard.note("g1", AGENT, RECEIVED, NOW) is Decision.TRIPPED
    assert guard.note("g2", AGENT, SENT, NOW) is Decision.PASS
    again = LoopGuard(tmp_path, {CAP_ENV: "2"})  # a second process reads the same file
    assert again.held("g1") and not again.held("g2") and not again.held("never-seen")
    assert again.note("g1", AGENT, RECEIVED, NOW) is Decision.HELD
    assert again.states() == {"g1": GroupState(2, True, NOW, 1), "g2": GroupState(1)}
    assert guard.resume("g1") is True
    assert guard.resume("g1") is False
    assert not again.held("g1")
    guard.forget("g2")
    assert set(again.states()) == {"g1"}


def test_the_stored_cap_is_the_identitys_setting(tmp_path: Path) -> None:
    guard = LoopGuard(tmp_path, {})
    assert guard.cap() == DEFAULT_CAP
    guard.set_cap(1)
    assert LoopGuard(tmp_path, {}).note("g", AGENT, SENT, NOW) is Decision.TRIPPED
    guard.set_cap(None)
    assert guard.cap() is None
    assert LoopGuard(tmp_path, {CAP_ENV: "5"}).cap() == 5


def test_a_bad_cap_in_the_environment_stops_the_note_with_one_line(tmp_path: Path) -> None:
    with pytest.raises(UserError, match=f"{CAP_ENV} is 'many'"):
        LoopGuard(tmp_path, {CAP_ENV: "many"}).note("g", AGENT, SENT, NOW)
    assert not (tmp_path / GUARD_FILE).exists()


@pytest.mark.parametrize("damage", ['["not", "an", "object"]', '{"groups": []}',
                                    '{"groups": {"g": {"count": 3, "held": "no"}}}',
                                    '{"groups": {"g": {"count": -1, "held": false}}}', "{not json"])
def test_a_damaged_file_is_reported_never_read_as_no_hold(tmp_path: Path, damage: str) -> None:
    (tmp_path / GUARD_FILE).write_text(damage)
    with pytest.raises(UserError, match=f"{GUARD_FILE} in .* is damaged"):
        LoopGuard(tmp_path, {}).note("g", AGENT, SENT, NOW)


NOTER = """
import sys
from pathlib import Path
from follower.loop_guard import Author, LoopGuard, Way
guard = LoopGuard(Path(sys.argv[1]))
print(" ".join(guard.note("team", Author.AGENT, Way.SENT).value for _ in range(int(sys.argv[2]))))
"""


def note_at_once(folder: Path, processes: int, each: int, cap: str) -> list[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO), CAP_ENV: cap}
    started = [subprocess.Popen([sys.executable, "-c", NOTER, str(folder), str(each)], env=env,
                                stdout=subprocess.PIPE, text=True) for _ in range(processes)]
    outputs = [p.communicate(timeout=120)[0].split() for p in started]
    assert all(p.returncode == 0 for p in started)
    return [d for out in outputs for d in out]


def test_processes_noting_at_once_lose_no_note(tmp_path: Path) -> None:
    decisions = note_at_once(tmp_path, processes=4, each=40, cap="off")
    assert decisions == ["pass"] * 160
    assert LoopGuard(tmp_path, {}).states() == {"team": GroupState(count=160)}


def test_processes_noting_at_once_trip_the_hold_exactly_once(tmp_path: Path) -> None:
    decisions = note_at_once(tmp_path, processes=4, each=40, cap="100")
    assert Counter(decisions) == {"pass": 99, "tripped": 1, "held": 60}
    state = LoopGuard(tmp_path, {}).states()["team"]
    assert state.held and state.count == 100


# What a person is told.


def test_the_notice_is_one_line_naming_the_group_the_count_and_the_commands() -> None:
    line = notice("team", 20)
    assert line == ("group #team held after 20 agent messages in a row with no person: a person reads "
                    "what it keeps aside with `talk held` and resumes it with `talk group resume team`")


def test_the_held_reason_names_the_group_and_who_can_lift_it() -> None:
    assert held_reason("team") == ("group #team is held by the recipient's loop guard until a person there "
                                   "resumes it")


def test_status_rows_put_held_groups_first_and_render_one_line_each() -> None:
    states = {"id-b": GroupState(4), "id-a": GroupState(20, True, NOW, 2), "id-c": GroupState(0)}
    rows = status_rows(states, {"id-a": "team", "id-b": "build"})
    assert [r["name"] for r in rows] == ["team", "build", "id-c"]  # an unnamed group shows its id
    assert json.loads(json.dumps(rows))[0] == {"group": "id-a", "name": "team", "count": 20, "held": True,
                                               "held_at": NOW, "kept": 2}
    assert render_row(rows[0], 20) == notice("team", 20) + ", 2 received message(s) kept aside"
    assert render_row(rows[1], 20) == "group #build: 4 agent message(s) in a row (held at 20)"
    assert render_row(rows[1], None) == "group #build: 4 agent message(s) in a row (loop guard off)"
