"""durable.locks: a lock not waited for is refused at once while another holder has it."""

from __future__ import annotations

from pathlib import Path

import pytest

from durable.locks import locked


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
