"""follower.send.ratchet_keys: the top-up rule (the relay round trips are in tests/e2e)."""

from __future__ import annotations

from follower.send.ratchet_keys import LOW, TARGET, top_up


def test_top_up_only_below_the_low_mark_and_back_to_the_target() -> None:
    assert [top_up(n) for n in (0, LOW - 1, LOW, TARGET, TARGET + 10)] == [
        TARGET, TARGET - LOW + 1, 0, 0, 0]
    assert top_up(3, low=5, target=8) == 5
