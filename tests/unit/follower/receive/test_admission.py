"""follower.receive.admission: which arriving mail is accepted, held or refused, by hops, policy and rate."""

from __future__ import annotations

from follower.policy import (
    Policy,
    Rule,
)
from follower.receive.admission import MAX_HOPS, Admission, RateWindow, admit, hops_of
from tests.unit.samples import FP_A, FP_B


def accept() -> Rule:
    return Rule(Policy.ACCEPT)


def hops(n: int) -> list[str]:
    return [f"{i:032x}" for i in range(n)]


def test_admit_accepts_a_contact_within_its_rate() -> None:
    assert admit(accept(), [], over_rate=False) == Admission(Policy.ACCEPT, "")


def test_admit_allows_exactly_the_hop_limit() -> None:
    assert admit(accept(), hops(MAX_HOPS), over_rate=False).action is Policy.ACCEPT


def test_admit_hop_limit_beats_every_policy() -> None:
    for policy in Policy:
        verdict = admit(Rule(policy), hops(MAX_HOPS + 1), over_rate=True)
        assert verdict.action is Policy.REFUSE
        assert f"{MAX_HOPS + 1} hops" in verdict.reason
        assert "loop" in verdict.reason


def test_admit_refuses_a_refused_contact_even_over_rate() -> None:
    verdict = admit(Rule(Policy.REFUSE), [], over_rate=True)
    assert verdict == Admission(Policy.REFUSE, "the recipient does not accept messages from you")


def test_admit_holds_a_held_contact_for_its_policy_not_its_rate() -> None:
    verdict = admit(Rule(Policy.HOLD), [], over_rate=True)
    assert verdict == Admission(Policy.HOLD, "held until the recipient accepts it")


def test_admit_holds_the_excess_over_the_receive_rate() -> None:
    verdict = admit(Rule(Policy.ACCEPT, receive_per_min=7), [], over_rate=True)
    assert verdict.action is Policy.HOLD
    assert "receive limit of 7 a minute" in verdict.reason


def test_hops_of_none_is_no_hops() -> None:
    assert hops_of(None) == []


def test_hops_of_valid_lists() -> None:
    assert hops_of([]) == []
    assert hops_of([FP_A, FP_B]) == [FP_A, FP_B]
    assert hops_of(hops(64)) == hops(64)


def test_hops_of_malformed_is_none() -> None:
    assert hops_of(FP_A) is None
    assert hops_of({"0": FP_A}) is None
    assert hops_of((FP_A,)) is None
    assert hops_of(3) is None
    assert hops_of([FP_A, "A" * 32]) is None  # upper case is not how fingerprints travel
    assert hops_of([FP_A, "abc"]) is None
    assert hops_of([FP_A, 12]) is None
    assert hops_of([None]) is None
    assert hops_of(hops(65)) is None


def test_rate_window_reaches_its_limit_within_a_minute() -> None:
    window = RateWindow()
    for t in (0.0, 10.0, 20.0):
        assert not window.over(FP_A, 3, t)
        window.count(FP_A, t)
    assert window.over(FP_A, 3, 30.0)
    assert window.over(FP_A, 3, 59.9)


def test_rate_window_allows_again_a_minute_later() -> None:
    window = RateWindow()
    for t in (0.0, 10.0, 20.0):
        window.count(FP_A, t)
    assert not window.over(FP_A, 3, 60.0)  # the message at 0 left the window
    window.count(FP_A, 60.0)
    assert window.over(FP_A, 3, 65.0)
    assert not window.over(FP_A, 3, 140.0)


def test_rate_window_is_per_contact_and_asking_counts_nothing() -> None:
    window = RateWindow()
    window.count(FP_A, 0.0)
    assert window.over(FP_A, 1, 1.0)
    for _ in range(5):
        assert not window.over(FP_B, 1, 1.0)


