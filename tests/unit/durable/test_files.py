"""durable.files.erase_file: a file that held keys leaves neither its name nor its bytes."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from durable.files import erase_file


def test_the_bytes_are_zeroed_before_the_name_goes(tmp_path: Path) -> None:
    path = tmp_path / "record.json"
    path.write_bytes(b"secret key bytes")
    kept = os.open(path, os.O_RDONLY)  # a reader of the same inode sees what the disk held last
    try:
        assert erase_file(path) is True
        assert not path.exists()
        assert os.pread(kept, 64, 0) == b"\0" * len(b"secret key bytes")
    finally:
        os.close(kept)


def test_a_missing_file_is_no_error(tmp_path: Path) -> None:
    assert erase_file(tmp_path / "gone") is False


def test_a_symbolic_link_is_refused_and_its_target_untouched(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere"
    target.write_bytes(b"not ours to erase")
    link = tmp_path / "record.json"
    link.symlink_to(target)
    with pytest.raises(OSError):
        erase_file(link)
    assert target.read_bytes() == b"not ours to erase"
