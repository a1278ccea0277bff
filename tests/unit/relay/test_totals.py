"""The SQLite relay's running totals: what a transaction moved stays only if it commits; a deposit
decided ahead of its write is counted until that write takes it over."""

from __future__ import annotations

from relay.totals import MailboxTotals

FP, TAG = "ab" * 16, "cd" * 16


def loaded() -> MailboxTotals:
    totals = MailboxTotals()
    totals.load([(FP, 2, 20, 1, 5)], [(FP, TAG, 2, 20)])
    return totals


def test_a_rolled_back_transaction_leaves_the_totals_as_they_were() -> None:
    totals = loaded()
    totals.count(FP, TAG, True, 1, 10)
    totals.count(FP, None, False, -1, -5)
    assert totals.box(FP) == (3, 30, 0, 0) and totals.channel(FP, TAG) == (3, 30)
    totals.undo()
    assert totals.box(FP) == (2, 20, 1, 5) and totals.channel(FP, TAG) == (2, 20)
    totals.count(FP, TAG, True, 1, 10)
    totals.keep()
    totals.undo()  # nothing journaled since the commit
    assert totals.box(FP) == (3, 30, 1, 5)


def test_a_held_deposit_counts_until_released_once() -> None:
    totals = loaded()
    hold = totals.hold(FP, TAG, True, 10)
    assert not totals.room(FP, True, 1, 3, 10**6)  # two stored and one held fill three
    totals.undo()  # a rollback of a transaction the hold is not part of leaves it counted
    assert totals.box(FP)[0] == 3
    totals.release(hold)
    totals.release(hold)
    assert totals.box(FP) == (2, 20, 1, 5) and totals.channel(FP, TAG) == (2, 20)


def test_quotas_are_per_kind_and_per_tag() -> None:
    totals = loaded()
    assert totals.room(FP, True, 80, 3, 100) and not totals.room(FP, True, 81, 3, 100)
    assert not totals.room(FP, False, 1, 1, 100)  # the one unregistered message fills a quota of one
    assert totals.tag_room(FP, TAG, 10, 3, 30) and not totals.tag_room(FP, TAG, 10, 2, None)
    assert totals.tag_room(FP, "ef" * 16, 10, 1, 10) and totals.tag_room(FP, TAG, 10**9, None, None)


def test_emptied_mailboxes_and_channels_are_forgotten() -> None:
    totals = loaded()
    totals.count(FP, TAG, True, -2, -20)
    totals.count(FP, "ef" * 16, False, -1, -5)
    totals.keep()
    assert totals.stored() == 0
    assert totals._boxes == {} and totals._channels == {}  # memory follows the mail waiting
