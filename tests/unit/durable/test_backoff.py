"""Retry delays grow, stay capped, and are spread by jitter; deposit pauses stay in their range."""

from __future__ import annotations

import pytest

from durable.backoff import Backoff
from follower.relay.backoff import DEPOSIT_DELAY_S, RETRY, deposit_delay, deposit_delay_range


def test_delays_grow_then_cap() -> None:
    top = [RETRY.delay(n, rand=lambda: 1.0) for n in range(1, 30)]
    assert top == sorted(top)
    assert top[0] == RETRY.base_s * 2 and top[-1] == RETRY.cap_s


def test_jitter_keeps_at_least_half() -> None:
    for n in range(1, 30):
        assert RETRY.delay(n, rand=lambda: 0.0) == RETRY.delay(n, rand=lambda: 1.0) / 2


def test_each_wait_is_drawn_from_the_upper_half_of_its_ceiling() -> None:
    retry = Backoff(base_s=1.0, cap_s=100.0)
    assert retry.delay(3, rand=lambda: 0.0) == 4.0 and retry.delay(3, rand=lambda: 1.0) == 8.0


def test_deposit_pauses_span_their_range() -> None:
    assert deposit_delay(None, rand=lambda: 0.0) == DEPOSIT_DELAY_S[0]
    assert deposit_delay(None, rand=lambda: 1.0) == DEPOSIT_DELAY_S[1]
    assert deposit_delay("0.3,0.6", rand=lambda: 0.5) == pytest.approx(0.45)
    assert deposit_delay_range("0,0") == (0.0, 0.0)


@pytest.mark.parametrize("spec", ["", "1", "2,1", "-1,1", "0,1e9", "nan,1", "a,b", "1,2,3"])
def test_a_bad_deposit_pause_setting_falls_back_to_the_default(spec: str) -> None:
    assert deposit_delay_range(spec) == DEPOSIT_DELAY_S
