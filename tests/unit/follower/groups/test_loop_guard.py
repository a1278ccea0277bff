"""follower.groups.loop_guard: agents' group messages in a row are capped; only a person here lifts a hold."""

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
from follower.groups.loop_guard import (
    CAP_ENV,
    DEFAULT_CAP,
    GUARD_FILE,
    Author,
    Decision,
    Direction,
    LoopGuard,
    MemberState,
    cap_in_force,
    claimed_author,
    decide,
    held_reason,
    is_loop_hold,
    kept_aside,
    lifted,
    notice,
    parse_cap,
    render_row,
    status_rows,
)
from tests.conftest import REPO

PERSON, AGENT = Author.PERSON, Author.AGENT
SENT, RECEIVED = Direction.SENT, Direction.RECEIVED
NOW = 1_700_000_000.0
ME, A, B = "0" * 32, "a" * 32, "b" * 32  # this identity, and two other members
Event = tuple[str, Author]  # who wrote it (ME: sent from here, else received from that member)


def run(events: list[Event], cap: int | None = 3,
        states: dict[str, MemberState] | None = None) -> tuple[list[Decision], dict[str, MemberState]]:
    decisions = []
    states = states or {}
    for writer, by in events:
        decision, states = decide(states, writer, by, SENT if writer == ME else RECEIVED, cap, NOW)
        decisions.append(decision)
    return decisions, states


# The pure decision.


def test_one_members_agent_messages_trip_once_at_the_cap_and_hold_that_member_alone() -> None:
    decisions, states = run([(A, AGENT)] * 3 + [(A, AGENT), (B, AGENT), (ME, AGENT), (A, AGENT)])
    assert decisions == [Decision.PASS, Decision.PASS, Decision.TRIPPED, Decision.HELD, Decision.PASS,
                         Decision.PASS, Decision.HELD]
    assert [d.passes for d in decisions[2:5]] == [True, False, True]
    assert states == {A: MemberState(count=3, held=True, held_at=NOW, kept=2), B: MemberState(1),
                      ME: MemberState(1)}


def test_our_own_agents_are_held_after_the_cap_and_their_sends_refused_while_others_flow() -> None:
    decisions, states = run([(ME, AGENT)] * 4 + [(A, AGENT)])
    assert decisions == [Decision.PASS, Decision.PASS, Decision.TRIPPED, Decision.HELD, Decision.PASS]
    assert states == {ME: MemberState(3, True, NOW), A: MemberState(1)}  # the refused send counted nothing


def test_a_persons_message_either_way_sets_every_count_back_to_zero_but_lifts_no_others_hold() -> None:
    _, held = run([(B, AGENT)] * 3)
    for person in (ME, A):
        decisions, states = run([(ME, AGENT), (A, AGENT), (person, PERSON), (ME, AGENT), (A, AGENT)],
                                states=held)
        assert Decision.TRIPPED not in decisions
        assert states == {ME: MemberState(1), A: MemberState(1), B: held[B]}


def test_a_held_member_stays_held_for_its_agents_and_its_own_persons_message() -> None:
    _, held = run([(A, AGENT)] * 3)
    decisions, after = run([(A, AGENT), (A, PERSON), (B, PERSON), (A, AGENT)], states=held)
    assert decisions == [Decision.HELD, Decision.HELD, Decision.PASS, Decision.HELD]
    assert after == {A: MemberState(3, True, NOW, kept=3)}


def test_a_persons_send_here_lifts_our_own_hold_only_and_the_counts_start_again() -> None:
    _, held = run([(ME, AGENT)] * 3 + [(A, AGENT)] * 3)
    decisions, after = run([(ME, PERSON), *[(ME, AGENT)] * 3], states=held)
    assert decisions == [Decision.PASS, Decision.PASS, Decision.PASS, Decision.TRIPPED]  # told anew
    assert after[ME].held and after[ME].kept == 0
    assert after[A] == held[A]  # its kept mail waits for a resume


def test_off_makes_no_hold_but_keeps_one_already_made() -> None:
    decisions, states = run([(A, AGENT)] * 50, cap=None)
    assert set(decisions) == {Decision.PASS} and states == {A: MemberState(count=50)}
    _, held = run([(A, AGENT)] * 3)
    assert run([(A, AGENT)], cap=None, states=held)[0] == [Decision.HELD]


def test_a_cap_lowered_below_the_count_trips_at_that_members_next_agent_message() -> None:
    _, states = run([(A, AGENT)] * 10, cap=None)
    assert run([(B, AGENT), (A, AGENT)], cap=5, states=states)[0] == [Decision.PASS, Decision.TRIPPED]


def test_a_resume_lifts_the_held_members_once_and_starts_only_their_counts_again() -> None:
    _, states = run([(A, AGENT)] * 3 + [(B, AGENT)] * 3 + [(ME, AGENT)])
    assert lifted(states, A) == ([A], {B: states[B], ME: MemberState(1)})
    resumed, after = lifted(states, None)
    assert sorted(resumed) == [A, B] and after == {ME: MemberState(1)}
    assert lifted(after, None) == ([], after)  # a second resume lifts nothing
    assert lifted(after, ME) == ([], {})  # a member not held: its count starts again, nothing lifted


@pytest.mark.parametrize(("value", "by"), [("person", PERSON), ("agent", AGENT), (None, AGENT),
                                           ("PERSON", AGENT), (1, AGENT), (["person"], AGENT)])
def test_only_a_message_that_says_exactly_person_counts_as_a_persons(value: object, by: Author) -> None:
    assert claimed_author(value) is by


# Any sequence: a member is held only by its own `cap` agent messages in a row, never keeps
# another's mail, is told once, and is lifted only here.

EVENT = st.one_of(st.tuples(st.sampled_from([ME, A, B]), st.sampled_from([PERSON, AGENT])),
                  st.tuples(st.just("resume"), st.sampled_from([ME, A, B, None])))


@given(st.integers(min_value=1, max_value=6), st.lists(EVENT, max_size=80))
def test_any_sequence_holds_a_member_only_after_its_own_cap_agent_messages_and_tells_once(
        cap: int, events: list[tuple[object, object]]) -> None:
    states: dict[str, MemberState] = {}
    runs = {ME: 0, A: 0, B: 0}  # each member's agent messages let through since a person's or its lift
    told: dict[str, int] = {}
    for first, second in events:
        before = {m: states.get(m, MemberState()).held for m in runs}
        if first == "resume":
            assert second is None or isinstance(second, str)
            resumed, states = lifted(states, second)
            assert sorted(resumed) == sorted(m for m in runs if before[m] and second in (None, m))
            for m in runs:  # a whole-group resume starts the held members again; a named one, that member
                if (second is None and before[m]) or second == m:
                    runs[m], told[m] = 0, 0
            continue
        assert isinstance(first, str) and isinstance(second, Author)
        decision, states = decide(states, first, second, SENT if first == ME else RECEIVED, cap, NOW)
        lifts = first == ME and second is PERSON
        assert (decision is Decision.HELD) == (before[first] and not lifts)  # nobody else's mail is kept
        if decision.passes and second is PERSON:
            runs = {m: runs[m] if before[m] and not (lifts and m == ME) else 0 for m in runs}
        elif decision.passes:
            runs[first] += 1
        if lifts:
            told[ME] = 0
        if decision is Decision.TRIPPED:
            told[first] = told.get(first, 0) + 1
            assert not before[first] and runs[first] == cap
        for m in runs:
            held = states.get(m, MemberState()).held
            tripped = m == first and decision is Decision.TRIPPED
            assert held == (tripped or (before[m] and not (lifts and m == ME)))  # lifted only here
            assert told.get(m, 0) == int(held)  # once per hold


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


def test_the_guard_keeps_each_groups_members_across_processes_views(tmp_path: Path) -> None:
    guard = LoopGuard(tmp_path, {CAP_ENV: "2"})
    assert guard.note("g1", A, AGENT, RECEIVED, NOW) is Decision.PASS
    assert guard.note("g1", A, AGENT, RECEIVED, NOW) is Decision.TRIPPED
    assert guard.note("g1", ME, AGENT, SENT, NOW) is Decision.PASS
    assert guard.note("g2", A, AGENT, RECEIVED, NOW) is Decision.PASS
    again = LoopGuard(tmp_path, {CAP_ENV: "2"})  # a second process reads the same file
    assert again.state("g1", A).held and not again.state("g2", A).held and not again.state("g0", A).held
    assert again.note("g1", A, AGENT, RECEIVED, NOW) is Decision.HELD
    assert again.note("g1", B, AGENT, RECEIVED, NOW) is Decision.PASS
    assert again.states() == {"g1": {A: MemberState(2, True, NOW, 1), ME: MemberState(1), B: MemberState(1)},
                              "g2": {A: MemberState(1)}}
    assert guard.resume("g1") == [A]
    assert guard.resume("g1") == []
    assert not again.state("g1", A).held and again.state("g1", B) == MemberState(1)
    guard.forget("g2")
    assert set(again.states()) == {"g1"}


def test_a_group_held_whole_by_an_older_talk_holds_no_member(tmp_path: Path) -> None:
    (tmp_path / GUARD_FILE).write_text('{"groups": {"g": {"count": 20, "held": true, "kept": 1}}}')
    guard = LoopGuard(tmp_path, {})
    assert guard.states() == {"g": {}}
    assert guard.note("g", A, AGENT, RECEIVED, NOW) is Decision.PASS


def test_the_stored_cap_is_the_identitys_setting(tmp_path: Path) -> None:
    guard = LoopGuard(tmp_path, {})
    assert guard.cap() == DEFAULT_CAP
    guard.set_cap(1)
    assert LoopGuard(tmp_path, {}).note("g", ME, AGENT, SENT, NOW) is Decision.TRIPPED
    guard.set_cap(None)
    assert guard.cap() is None
    assert LoopGuard(tmp_path, {CAP_ENV: "5"}).cap() == 5


def test_a_bad_cap_in_the_environment_stops_the_note_with_one_line(tmp_path: Path) -> None:
    with pytest.raises(UserError, match=f"{CAP_ENV} is 'many'"):
        LoopGuard(tmp_path, {CAP_ENV: "many"}).note("g", ME, AGENT, SENT, NOW)
    assert not (tmp_path / GUARD_FILE).exists()


def one_member(state: object) -> str:
    return json.dumps({"groups": {"g": {"members": {A: state}}}})


@pytest.mark.parametrize("damage", ['["not", "an", "object"]', '{"groups": []}', '{"groups": {"g": []}}',
                                    '{"groups": {"g": {"members": []}}}',
                                    one_member({"count": 3, "held": "no"}),
                                    one_member({"count": -1, "held": False}), one_member([]), "{not json"])
def test_a_damaged_file_is_reported_never_read_as_no_hold(tmp_path: Path, damage: str) -> None:
    (tmp_path / GUARD_FILE).write_text(damage)
    with pytest.raises(UserError, match=f"{GUARD_FILE} in .* is damaged"):
        LoopGuard(tmp_path, {}).note("g", A, AGENT, RECEIVED, NOW)


NOTER = """
import sys
from pathlib import Path
from follower.groups.loop_guard import Author, LoopGuard, Direction
guard = LoopGuard(Path(sys.argv[1]))
print(" ".join(guard.note("team", "a" * 32, Author.AGENT, Direction.RECEIVED).value
               for _ in range(int(sys.argv[2]))))
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
    assert LoopGuard(tmp_path, {}).states() == {"team": {A: MemberState(count=160)}}


def test_processes_noting_at_once_trip_the_hold_exactly_once(tmp_path: Path) -> None:
    decisions = note_at_once(tmp_path, processes=4, each=40, cap="100")
    assert Counter(decisions) == {"pass": 99, "tripped": 1, "held": 60}
    state = LoopGuard(tmp_path, {}).state("team", A)
    assert state.held and state.count == 100 and state.kept == 60


# What a person is told.


def test_the_notice_is_one_line_naming_the_group_the_member_the_count_and_the_commands() -> None:
    assert notice("team", "bob", 20) == (
        "group #team: bob held after 20 agent messages in a row with no person (the other members' mail "
        "still flows): a person reads what is kept aside with `talk held` and resumes bob with "
        "`talk group resume team`")
    assert notice("team", None, 20) == (
        "group #team: your agents' sends held after 20 agent messages in a row with no person: a person "
        "sends to it from a terminal or resumes it with `talk group resume team`")


def test_the_held_reason_names_the_group_the_member_and_who_can_lift_it() -> None:
    reason = held_reason("team", "bob")
    assert reason == ("bob's messages in group #team are held by the recipient's loop guard until a person "
                      "there resumes them")
    assert is_loop_hold(reason) and not is_loop_hold("held by policy")


def test_a_resume_releases_what_the_guard_kept_from_the_resumed_oldest_first_and_nothing_else() -> None:
    def entry(sender: str, group: str, reason: str, at: float) -> dict[str, object]:
        return {"record": {"from": sender, "group_id": group}, "reason": reason, "held_at": at}

    held = {"i1": entry(A, "g", held_reason("team", "alice"), 3.0),
            "i2": entry(A, "g", held_reason("team", "alice"), 1.0),
            "i3": entry(B, "g", held_reason("team", "bob"), 2.0),
            "i4": entry(B, "g", "held by the policy for bob", 0.5),  # waits for a person's `talk held`
            "i5": entry(A, "other", held_reason("else", "alice"), 0.1),
            "i6": entry(B, "g", "group #team is held by the recipient's loop guard until a person there "
                        "resumes it", 0.2)}  # an older talk's whole-group hold
    assert kept_aside(held, "g", A) == ["i2", "i1"]
    assert kept_aside(held, "g", None) == ["i6", "i2", "i3", "i1"]
    assert kept_aside(held, "g", ME) == []


def test_status_rows_put_held_groups_first_and_render_one_line_per_held_member() -> None:
    states = {"id-b": {A: MemberState(4), ME: MemberState(2)},
              "id-a": {A: MemberState(20, True, NOW, 2), ME: MemberState(20, True, NOW), B: MemberState(1)},
              "id-c": {}}
    rows = status_rows(states, {"id-a": "team", "id-b": "build"}, {A: "alice", ME: "me"}, ME)
    assert [r["name"] for r in rows] == ["team", "build", "id-c"]  # an unnamed group shows its id
    team = json.loads(json.dumps(rows))[0]
    assert {k: v for k, v in team.items() if k != "members"} == {
        "group": "id-a", "name": "team", "count": 20, "held": True, "held_at": NOW, "kept": 2}
    assert [(m["name"], m["you"], m["held"]) for m in team["members"]] == [
        ("me", True, True), ("alice", False, True), (B[:8], False, False)]
    assert render_row(rows[0], 20).split("\n") == [
        notice("team", None, 20), notice("team", "alice", 20) + ", 2 received message(s) kept aside"]
    assert render_row(rows[1], 20) == "group #build: at most 4 agent message(s) in a row from one member " \
        "(a member is held at 20)"
    assert render_row(rows[2], None) == "group #id-c: at most 0 agent message(s) in a row from one member " \
        "(loop guard off)"
