"""Owner tokens: each counter accepted once, and the table forgets the oldest first."""

from __future__ import annotations

import time

import pytest

from relay.owner_tokens import MAX_PER_MAILBOX, WINDOW, OwnerToken, OwnerTokens


@pytest.mark.parametrize("order", [[1, 2, 3], [3, 1, 2], [1, 1025, 2], [2000, 977, 976]])
def test_the_replay_window_accepts_each_counter_once(order: list[int]) -> None:
    token = OwnerToken("f" * 32, b"k" * 32, time.time() + 60)
    verdicts = [token.fresh_counter(n) for n in order]
    expected = [n == max(order[: i + 1]) or max(order[: i + 1]) - n < WINDOW
                for i, n in enumerate(order)]
    assert verdicts == expected
    assert not any(token.fresh_counter(n) for n in order)  # every one a replay now


def test_tokens_expire_and_the_oldest_go_first() -> None:
    tokens = OwnerTokens(ttl_s=10.0, most=3)
    tid, token = tokens.open("a" * 32, now=100.0)
    assert tokens.get(tid, now=105.0) is token and tokens.get(tid, now=110.0) is None and len(tokens) == 0
    opened = [tokens.open(fp * 32, now=100.0)[0] for fp in "bcde"]
    assert tokens.get(opened[0], now=101.0) is None and all(tokens.get(t, now=101.0) for t in opened[1:])
    mine = [tokens.open("f" * 32, now=100.0)[0] for _ in range(MAX_PER_MAILBOX + 1)]
    assert tokens.get(mine[0], now=101.0) is None and tokens.get(mine[-1], now=101.0) is not None
