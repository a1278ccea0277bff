"""Retry delays grow, stay capped, and are spread by jitter."""

from __future__ import annotations

from follower.backoff import BASE_S, CAP_S, delay


def test_delays_grow_then_cap() -> None:
    top = [delay(n, rand=lambda: 1.0) for n in range(1, 30)]
    assert top == sorted(top)
    assert top[0] == BASE_S * 2 and top[-1] == CAP_S


def test_jitter_keeps_at_least_half() -> None:
    for n in range(1, 30):
        assert delay(n, rand=lambda: 0.0) == delay(n, rand=lambda: 1.0) / 2
