"""The look at a lock file: held by a live holder, free, missing, or a link refused."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from durable.errors import LocalFileRefused
from durable.held import held_by_other
from durable.locks import held_by_other as held_by_other_refusing_links
from durable.locks import hold_for_life
from tests.conftest import REPO


def test_the_look_sees_a_holder_and_no_holder(tmp_path: Path) -> None:
    lock = tmp_path / "life.lock"
    assert not held_by_other(str(lock)) and not lock.exists()  # looking creates nothing
    fd = hold_for_life(lock)  # an flock is per open file: this process's holder counts as another
    assert fd is not None
    assert held_by_other(str(lock)) and held_by_other_refusing_links(lock)
    os.close(fd)
    assert not held_by_other(lock)


def test_a_link_is_never_followed(tmp_path: Path) -> None:
    (tmp_path / "real.lock").touch()
    (tmp_path / "link.lock").symlink_to(tmp_path / "real.lock")
    with pytest.raises(OSError):
        held_by_other(tmp_path / "link.lock")
    with pytest.raises(LocalFileRefused, match="symbolic link"):
        held_by_other_refusing_links(tmp_path / "link.lock")


def test_the_look_imports_only_the_standard_library() -> None:
    code = (f"import sys; sys.path.insert(0, {str(REPO)!r}); before = set(sys.modules); "
            "import durable.held; print(' '.join(sorted(set(sys.modules) - before)))")
    loaded = subprocess.run([sys.executable, "-I", "-S", "-c", code], capture_output=True, text=True,
                            check=True).stdout.split()
    assert {m for m in loaded if m.split(".")[0] == "durable"} == {"durable", "durable.faces", "durable.held"}
    assert all(m.split(".")[0] in sys.stdlib_module_names for m in loaded if m.split(".")[0] != "durable")
