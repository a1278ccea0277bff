"""follower.daemon.daemon.DrainAsked: what tells the follower's loop to fetch, apart from what
only has it look at its clock again (receipts queued by a drain on the push thread)."""

from __future__ import annotations

import threading

from follower.daemon.daemon import DrainAsked


def test_asking_wakes_the_loop_and_is_taken_once() -> None:
    wake = threading.Event()
    asked = DrainAsked(wake)
    asked.set()
    assert wake.is_set()
    assert asked.take() and not asked.take()


def test_a_wake_alone_asks_for_no_fetch() -> None:
    wake = threading.Event()
    asked = DrainAsked(wake)
    wake.set()
    assert not asked.take()


def test_an_ask_between_the_loop_clearing_its_wake_and_taking_it_is_not_lost() -> None:
    """The loop clears its wake, then takes the flag: an ask in between is taken at once, and
    one just after leaves the wake set, so the loop's wait returns and the next turn takes it."""
    wake = threading.Event()
    asked = DrainAsked(wake)
    wake.clear()
    asked.set()
    assert asked.take()
    wake.clear()
    assert not asked.take()
    asked.set()
    assert wake.wait(0) and asked.take()
