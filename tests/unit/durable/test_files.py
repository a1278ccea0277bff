"""durable.files: a file that held keys leaves neither its name nor its bytes (erase_file); a
private folder is made 0700 and a folder others could write or a link is refused (ensure_private_dir)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from durable.errors import LocalFileRefused
from durable.files import ensure_private_dir, erase_file, read_json


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


def test_a_record_read_while_it_is_erased_reads_as_gone_not_damaged(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """`talk outbox` lists transfers while the follower finishes one: read between the zeros and
    the unlink, the record is gone, not a damaged file; one that is not JSON still is."""
    path = tmp_path / "record.json"
    path.write_bytes(b'{"key": "secret key bytes"}')
    seen: list[object] = []
    fsync = os.fsync

    def read_meanwhile(fd: int) -> None:
        fsync(fd)
        seen.append(read_json(path, "gone", erasable=True))

    monkeypatch.setattr(os, "fsync", read_meanwhile)
    assert erase_file(path) is True
    assert seen == ["gone"] and read_json(path, "gone", erasable=True) == "gone"
    path.write_bytes(b"\0\0not json")
    with pytest.raises(LocalFileRefused, match="damaged"):
        read_json(path, "gone", erasable=True)
    path.write_bytes(b"")  # empty is no erased record either
    with pytest.raises(LocalFileRefused, match="damaged"):
        read_json(path, "gone", erasable=True)


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


def test_ensure_private_dir_makes_a_missing_folder_0700(tmp_path: Path) -> None:
    folder = tmp_path / "a" / "b"
    ensure_private_dir(folder)
    assert folder.is_dir() and stat.S_IMODE(folder.stat().st_mode) == 0o700
    ensure_private_dir(folder)  # found as made: one look, nothing changed
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700


def test_ensure_private_dir_closes_a_folder_others_could_read(tmp_path: Path) -> None:
    folder = tmp_path / "open"
    folder.mkdir(mode=0o755)
    folder.chmod(0o755)
    ensure_private_dir(folder)
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700


@pytest.mark.parametrize("mode", [0o770, 0o777, 0o702])
def test_ensure_private_dir_refuses_a_folder_others_could_write(tmp_path: Path, mode: int) -> None:
    folder = tmp_path / "shared"
    folder.mkdir()
    folder.chmod(mode)
    with pytest.raises(LocalFileRefused, match="writable by other users"):
        ensure_private_dir(folder)
    assert stat.S_IMODE(folder.stat().st_mode) == mode  # refused, not changed behind the user's back


def test_ensure_private_dir_refuses_a_link_to_a_private_folder_unless_told_to_follow(tmp_path: Path) -> None:
    real = tmp_path / "real"
    ensure_private_dir(real)
    link = tmp_path / "link"
    link.symlink_to(real)
    with pytest.raises(LocalFileRefused, match="symbolic link"):
        ensure_private_dir(link)
    ensure_private_dir(link, follow=True)  # a TALK_HOME the user linked elsewhere


def test_ensure_private_dir_refuses_a_file_in_its_place(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("x")
    with pytest.raises(LocalFileRefused, match="cannot be a folder"):
        ensure_private_dir(tmp_path / "f")
