"""follower.history.timeline: one time order on this machine's clock, dedup, tasks, and the unread rule."""

from __future__ import annotations

from typing import Any

from follower.history.timeline import (
    Direction,
    Line,
    held_line,
    marks_after,
    merge,
    newest_arrivals,
    pick,
    raised,
    received_line,
    sent_line,
    unseen,
    with_tasks,
)
from follower.send.outbox import Entry
from follower.tasks.ledger import fold
from tests.unit.samples import FP_A, FP_B, hexid

NAMES = {FP_A: "alice", FP_B: "bob"}


def record(n: int, received: str, sender: str = FP_A, **more: Any) -> dict[str, Any]:
    return {"id": hexid(n), "from": sender, "name": "old name", "text": f"text {n}",
            "ts": "2030-01-01T00:00:00Z", "kind": "chat", "received": received, **more}


def sent(n: int, ts: float, to: str = FP_A, **more: Any) -> Entry:
    return Entry(id=hexid(n), to=to, name="alice", kind="chat", text=f"sent {n}", ts=ts, **more)


def test_a_received_line_takes_the_arrival_time_and_todays_contact_name() -> None:
    line = received_line(record(1, "2024-01-01T00:00:10Z"), NAMES)
    assert (line.direction, line.name, line.fingerprint, line.text) == (Direction.IN, "alice", FP_A, "text 1")
    assert line.at == 1704067210.0  # the arrival, not the sender's claim of 2030


def test_a_received_line_survives_fields_of_the_wrong_type() -> None:
    odd = {"id": hexid(2), "from": 7, "text": ["x"], "kind": None, "received": 5, "ts": "nonsense",
           "task": {"no": 1}}
    line = received_line(odd, NAMES)
    shown = (line.name, line.fingerprint, line.text, line.kind, line.at, line.task)
    assert shown == ("", "", "", "chat", 0.0, None)


def test_an_unknown_sender_keeps_the_name_its_line_carries() -> None:
    assert received_line(record(1, "2024-01-01T00:00:10Z", sender="f" * 32), NAMES).name == "old name"


def test_a_held_line_is_placed_when_held_and_says_why() -> None:
    entry = {"record": record(3, ""), "reason": "policy: hold", "held_at": 1704067300.5}
    line = held_line(hexid(3), entry, NAMES)
    assert (line.held, line.reason, line.at, line.id) == (True, "policy: hold", 1704067300.5, hexid(3))


def test_a_sent_line_carries_its_state_reason_and_task() -> None:
    line = sent_line(sent(4, 50.0, state="refused", reason="no", extra={"task": "alice-x"}))
    assert (line.direction, line.state, line.reason, line.task, line.at) == (Direction.OUT, "refused", "no",
                                                                          "alice-x", 50.0)


def test_merge_interleaves_by_time_and_a_released_message_shows_once_as_spooled() -> None:
    a = received_line(record(1, "2024-01-01T00:00:30Z"), NAMES)
    b = sent_line(sent(2, 1704067220.0))
    held_then_released = held_line(hexid(1), {"record": record(1, ""), "reason": "r", "held_at": 1.0}, NAMES)
    c = sent_line(sent(3, 1704067240.0))
    merged = merge([a], [held_then_released], [c, b])
    assert [line.id for line in merged] == [hexid(2), hexid(1), hexid(3)]
    assert merged[1].held is False


def test_tasks_give_a_sent_message_its_kind_gist_and_latest_status() -> None:
    events = [
        {"ev": "task", "dir": "out", "peer": FP_A, "name": "alice", "msg": hexid(1), "ts": 1.0,
         "task": "me-1", "text": "count the tests"},
        {"ev": "result", "dir": "in", "peer": FP_A, "name": "alice", "msg": hexid(2), "ts": 2.0,
         "task": "me-1", "status": "done", "summary": "612"},
    ]
    lines = [sent_line(sent(1, 1.0, extra={"task": "me-1"})),
             received_line(record(2, "2024-01-01T00:00:30Z", kind="result", task="me-1"), NAMES),
             sent_line(sent(3, 3.0))]
    task, result, plain = with_tasks(lines, events, fold(events))
    assert (task.kind, task.gist, task.task_status) == ("task", "count the tests", "done")
    assert (result.kind, result.gist, result.task_status) == ("result", "612", "done")
    assert (plain.kind, plain.task, plain.task_status) == ("chat", None, None)


def test_a_task_the_ledger_forgot_has_no_status() -> None:
    (line,) = with_tasks([sent_line(sent(1, 1.0, extra={"task": "gone-1"}))], [], {})
    assert (line.task, line.task_status) == ("gone-1", None)


def lines_at(*ats: float, sender: str = FP_A) -> list[Line]:
    return [Line(hexid(i), Direction.IN, "alice", sender, at, "chat", "t") for i, at in enumerate(ats)]


def test_received_mail_after_the_mark_is_unread_and_sent_mail_never() -> None:
    marked = marks_after([*lines_at(10.0, 20.0), sent_line(sent(9, 30.0))], {FP_A: 10.0})
    assert [line.unread for line in marked] == [False, True, False]
    assert all(line.unread for line in marks_after(lines_at(1.0), {}))  # never read: all new


def test_the_marks_that_make_lines_read_are_each_senders_newest_arrival() -> None:
    lines = [*lines_at(5.0, 9.0), *lines_at(7.0, sender=FP_B), sent_line(sent(9, 99.0))]
    assert newest_arrivals(lines) == {FP_A: 9.0, FP_B: 7.0}


def test_marks_never_move_back() -> None:
    assert raised({FP_A: 10.0, FP_B: 5.0}, {FP_A: 3.0, FP_B: 6.0}) == {FP_A: 10.0, FP_B: 6.0}


def test_pick_keeps_the_newest_and_can_keep_only_the_unread() -> None:
    lines = marks_after(lines_at(1.0, 2.0, 3.0, 4.0), {FP_A: 2.0})
    assert [line.at for line in pick(lines, False, 2)] == [3.0, 4.0]
    assert [line.at for line in pick(lines, False, 0)] == [1.0, 2.0, 3.0, 4.0]
    assert [line.at for line in pick(lines, True, 0)] == [3.0, 4.0]
    assert [line.at for line in pick(lines, True, 1)] == [4.0]


def test_unseen_gives_each_id_once_across_calls_and_sources() -> None:
    seen: set[str] = set()
    spooled = received_line(record(1, "2024-01-01T00:00:10Z"), NAMES)
    logged = received_line(record(1, "2024-01-01T00:00:20Z"), NAMES)
    other = received_line(record(2, "2024-01-01T00:00:30Z"), NAMES)
    assert unseen([spooled, logged, other, other], seen) == [spooled, other]  # the first kept
    assert seen == {hexid(1), hexid(2)}
    assert unseen([logged, other], seen) == []  # a later read (following) repeats nothing
