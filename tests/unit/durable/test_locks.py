"""durable.locks: a lock not waited for is refused at once while another holder has it; a kept lock too."""

from __future__ import annotations

from pathlib import Path

import pytest

from durable.locks import kept_locked, locked


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
