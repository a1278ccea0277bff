"""follower.receive.sequence: what an arriving message is, decided from a sender's channel alone."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from durable.errors import ReplayedMessage, StaleMessage
from follower.receive.sequence import (
    FUTURE_S,
    MAX_GAPS,
    WINDOW_S,
    Channel,
    Gap,
    SequenceVerdict,
    judge,
    refuse_if_out_of_window,
    spool_fields,
    unknown_start,
)
from keys.encoding import iso_from_epoch

NOW = 1_800_000_000.0
TS = iso_from_epoch(NOW - 5)


def take(channel: Channel, seq: int | None, ts: str = TS,
         now: float = NOW) -> tuple[SequenceVerdict, Channel]:
    decision = judge(channel, seq, ts, known=False, now=now)
    return decision.verdict, decision.after


def test_in_order_messages_leave_no_gap() -> None:
    channel = Channel()
    for seq in (1, 2, 3):
        verdict, channel = take(channel, seq)
        assert verdict is SequenceVerdict.NEW
    assert channel == Channel(3) and channel.missing(NOW) == 0


def test_a_jump_shows_the_skipped_messages_as_missing() -> None:
    decision = judge(Channel(2), 5, TS, known=False, now=NOW)
    assert decision.verdict is SequenceVerdict.NEW
    assert decision.skipped == 2 and decision.missing == 2
    assert decision.after == Channel(5, (Gap(3, 4, NOW),))
    assert spool_fields(decision) == {"gap": 2}


def test_a_dropped_first_message_counts_for_a_contact_added_after_the_store() -> None:
    assert judge(Channel(), 2, TS, known=False, now=NOW).skipped == 1


def test_a_contact_older_than_the_store_starts_counting_at_its_first_number() -> None:
    decision = judge(unknown_start(), 40, TS, known=False, now=NOW)
    assert decision.verdict is SequenceVerdict.NEW and decision.skipped == 0
    assert decision.after == Channel(40)


def test_a_late_message_fills_its_gap_and_is_marked_late() -> None:
    _, channel = take(Channel(1), 3)
    decision = judge(channel, 2, TS, known=False, now=NOW)
    assert decision.verdict is SequenceVerdict.LATE
    assert decision.after == Channel(3) and decision.missing == 0
    assert spool_fields(decision) == {"late": True}


def test_filling_the_middle_of_a_gap_splits_it() -> None:
    _, channel = take(Channel(0), 10)  # 1..9 missing
    verdict, channel = take(channel, 5)
    assert verdict is SequenceVerdict.LATE
    assert channel.gaps == (Gap(1, 4, NOW), Gap(6, 9, NOW))
    assert channel.missing(NOW) == 8


def test_a_seen_number_under_a_new_id_is_a_replay_and_changes_nothing() -> None:
    channel = Channel(3, (Gap(2, 2, NOW),))
    for seq in (1, 3):
        decision = judge(channel, seq, TS, known=False, now=NOW)
        assert decision.verdict is SequenceVerdict.REPLAY and decision.after is channel
        with pytest.raises(ReplayedMessage, match="refused as a replay") as refused:
            refuse_if_out_of_window(decision, "alice")
        assert refused.value.highest == 3  # told to the sender, to number past it


def test_a_known_id_is_a_duplicate_whatever_its_number_or_date() -> None:
    decision = judge(Channel(3), 1, iso_from_epoch(NOW - 40 * 86400), known=True, now=NOW)
    assert decision.verdict is SequenceVerdict.DUPLICATE
    refuse_if_out_of_window(decision, "alice")  # a duplicate is not refused: it is acked quietly


@pytest.mark.parametrize("ts", [
    iso_from_epoch(NOW - WINDOW_S - 1),
    iso_from_epoch(NOW - 30 * 86400),
    iso_from_epoch(NOW + FUTURE_S + 60),
    "yesterday",
    "2026-01-01T00:00:00",  # no zone: cannot be placed
])
def test_dates_outside_the_window_are_stale(ts: str) -> None:
    decision = judge(Channel(1), 2, ts, known=False, now=NOW)
    assert decision.verdict is SequenceVerdict.STALE and decision.after == Channel(1)
    with pytest.raises(StaleMessage, match="refused as stale"):
        refuse_if_out_of_window(decision, "alice")


def test_dates_just_inside_the_window_are_fresh() -> None:
    for ts in (iso_from_epoch(NOW - WINDOW_S + 60), iso_from_epoch(NOW + FUTURE_S - 60)):
        assert judge(Channel(1), 2, ts, known=False, now=NOW).verdict is SequenceVerdict.NEW


def test_a_message_without_a_number_is_judged_by_id_and_date_alone() -> None:
    channel = Channel(3, (Gap(2, 2, NOW),))
    decision = judge(channel, None, TS, known=False, now=NOW)
    assert decision.verdict is SequenceVerdict.NEW and decision.after == channel and decision.missing == 1
    assert judge(channel, None, iso_from_epoch(NOW - 20 * 86400), False, NOW).verdict is SequenceVerdict.STALE


def test_a_gap_older_than_the_window_is_given_up() -> None:
    channel = Channel(5, (Gap(2, 3, NOW - WINDOW_S - 1),))
    assert channel.missing(NOW) == 0
    decision = judge(channel, 6, TS, known=False, now=NOW)
    assert decision.after == Channel(6)


def test_gaps_are_bounded_per_sender() -> None:
    channel = Channel()
    for seq in range(2, 2 * (MAX_GAPS + 10), 2):  # every other message dropped
        _, channel = take(channel, seq)
    assert len(channel.gaps) == MAX_GAPS


def test_a_huge_jump_is_one_range() -> None:
    _, channel = take(Channel(1), 2**53)
    assert channel.gaps == (Gap(2, 2**53 - 1, NOW),) and channel.missing(NOW) == 2**53 - 2


@given(st.permutations(list(range(1, 13))), st.integers(min_value=0, max_value=11))
def test_any_order_with_any_drops_ends_with_exactly_the_dropped_missing(
        order: list[int], dropped: int) -> None:
    kept = order[:len(order) - dropped] if dropped else order
    channel = Channel()
    for seq in kept:
        verdict, channel = take(channel, seq)
        assert verdict in (SequenceVerdict.NEW, SequenceVerdict.LATE)
    for seq in kept:  # any of them again under another id: a replay
        assert take(channel, seq)[0] is SequenceVerdict.REPLAY
    top = max(kept)
    assert channel.highest == top
    assert channel.missing(NOW) == top - len(kept)
