"""follower.daemon.state: the status file is rewritten when what it says changes, not per drain."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from follower.daemon.state import HEARTBEAT_S, FollowStatus, StatusFile

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


def test_a_change_made_while_the_file_is_written_is_written_next(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    # The push thread counts a refusal while the loop's thread writes the file (its sync takes
    # milliseconds): the file then holds the count before it, and the next save must write it.
    status = replace(BASE)
    file = StatusFile(tmp_path)
    write = FollowStatus.save

    def counted_meanwhile(self: FollowStatus, folder: Path) -> None:
        write(self, folder)
        status.refused += 1

    monkeypatch.setattr(FollowStatus, "save", counted_meanwhile)
    file.save(status)
    monkeypatch.setattr(FollowStatus, "save", write)
    assert FollowStatus.load(tmp_path) == replace(BASE)
    file.save(status)
    assert FollowStatus.load(tmp_path) == replace(BASE, refused=1)


def test_a_status_not_written_is_written_by_the_next_save(tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    file = StatusFile(tmp_path)

    def full(self: FollowStatus, folder: Path) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(FollowStatus, "save", full)
    with pytest.raises(OSError):
        file.save(BASE)
    monkeypatch.undo()
    file.save(BASE)
    assert FollowStatus.load(tmp_path) == BASE
