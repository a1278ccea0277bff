"""durable.locks: a lock not waited for is refused at once while another holder has it; a kept lock too."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from durable import locks
from durable.locks import KEPT_MOST, kept_locked, locked
from tests.conftest import open_paths


def test_a_lock_not_waited_for_is_refused_while_held_and_taken_once_free(tmp_path: Path) -> None:
    path = tmp_path / "x.lock"
    with locked(path):  # another open file is another holder to flock, even in this process
        for shared in (False, True):
            with pytest.raises(BlockingIOError), locked(path, shared=shared, wait=False):
                pass
        with locked(tmp_path / "y.lock", wait=False):
            pass  # an unrelated lock is free
    with locked(path, wait=False) as fd:
        assert fd >= 0


def test_kept_locked_excludes_other_holders_and_is_released(tmp_path: Path) -> None:
    path = tmp_path / "peer.lock"
    with kept_locked(path), pytest.raises(BlockingIOError), locked(path, wait=False):
        pass
    with locked(path, wait=False):  # released, though the file stays open
        pass
    with kept_locked(path), pytest.raises(BlockingIOError), locked(path, wait=False):
        pass  # and taken again on the same descriptor


def test_kept_locked_follows_a_lock_file_made_anew(tmp_path: Path) -> None:
    path = tmp_path / "peer.lock"
    with kept_locked(path):
        pass
    path.unlink()  # its folder emptied, say: others now lock a new file at the path
    with kept_locked(path), pytest.raises(BlockingIOError), locked(path, wait=False):
        pass



@pytest.fixture(autouse=True)
def no_kept_locks(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Each test starts with no lock kept open, whatever ran before it in this process."""
    kept: dict[Path, Any] = {}
    monkeypatch.setattr(locks, "_KEPT", kept)
    yield
    for hold in kept.values():
        hold.close_if_idle()



def test_kept_locks_stay_few_however_many_files_are_locked(tmp_path: Path) -> None:
    # A follower keeps one per peer it answers in a session: unbounded, a few thousand contacts
    # would reach the limit of open files, and then nothing opens at all.
    paths = [tmp_path / f"peer{i}.lock" for i in range(5 * KEPT_MOST)]
    for path in paths:
        with kept_locked(path):
            pass
    assert len({str(p) for p in paths} & open_paths()) == KEPT_MOST
    for path in (paths[0], paths[-1]):  # closed to make room or still kept open: either still locks
        with kept_locked(path), pytest.raises(BlockingIOError), locked(path, wait=False):
            pass
        with locked(path, wait=False):
            pass


def test_a_held_kept_lock_is_never_closed_to_make_room(tmp_path: Path) -> None:
    path = tmp_path / "busy.lock"
    with kept_locked(path):
        for i in range(2 * KEPT_MOST):
            with kept_locked(tmp_path / f"other{i}.lock"):
                pass
        assert str(path) in open_paths()
        with pytest.raises(BlockingIOError), locked(path, wait=False):
            pass  # still held: closing its file would have let the flock go
    with locked(path, wait=False):
        pass


def test_a_kept_lock_handed_out_and_closed_meanwhile_opens_again_when_taken(tmp_path: Path) -> None:
    path = tmp_path / "late.lock"
    hold = kept_locked(path)  # another thread makes room before this one takes it
    for i in range(KEPT_MOST):
        with kept_locked(tmp_path / f"other{i}.lock"):
            pass
    assert str(path) not in open_paths()  # closed, as the oldest
    with hold, pytest.raises(BlockingIOError), locked(path, wait=False):
        pass
    with locked(path, wait=False):
        pass
    assert str(path) not in open_paths()  # no longer kept: closed again once released
