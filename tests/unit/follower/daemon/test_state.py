"""follower.daemon.state: the status file is rewritten when what it says changes, not per drain."""

from __future__ import annotations

from dataclasses import replace

from follower.daemon.state import HEARTBEAT_S, FollowStatus

BASE = FollowStatus(pid=7, relay="http://r", since=1.0, last_contact=10.0, push="connected")


def test_nothing_changed_nothing_written() -> None:
    assert not replace(BASE).due(BASE, 0.0, 1000.0)


def test_the_first_status_and_the_first_contact_are_written_at_once() -> None:
    assert BASE.due(None, 0.0, 0.0)
    assert BASE.due(replace(BASE, last_contact=None), 5.0, 5.0)


def test_a_field_the_user_reads_is_written_at_once() -> None:
    for changed in (replace(BASE, push="connecting"), replace(BASE, last_error="down"),
                    replace(BASE, refused=1), replace(BASE, peers=["bob"]),
                    replace(BASE, delivered=1, push="off")):
        assert changed.due(BASE, 5.0, 5.0)


def test_the_heartbeat_alone_waits_until_the_file_is_old_enough() -> None:
    beat = replace(BASE, last_contact=11.0, delivered=3)
    assert not beat.due(BASE, 5.0, 5.0 + HEARTBEAT_S / 2)
    assert beat.due(BASE, 5.0, 5.0 + HEARTBEAT_S)
