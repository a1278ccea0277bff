"""What `talk install` writes is private whatever the umask, and what others can write is found and closed."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from alarms.host_files import copy_tree, loose, make_folders, tighten, tree, write_file


@pytest.fixture
def open_umask() -> Iterator[None]:
    old = os.umask(0)
    try:
        yield
    finally:
        os.umask(old)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_folders_and_files_are_private_under_umask_000(tmp_path: Path, open_umask: None) -> None:
    make_folders(tmp_path / "a" / "b" / "c")
    assert [mode(tmp_path / p) for p in ("a", "a/b", "a/b/c")] == [0o700] * 3
    write_file(tmp_path / "x" / "hook.sh", b"#!/bin/sh\n", executable=True)
    write_file(tmp_path / "x" / "conf.json", b"{}")
    write_file(tmp_path / "x" / "kept.json", b"{}", mode=0o666)  # a mode kept, less others' write
    assert (mode(tmp_path / "x"), mode(tmp_path / "x" / "hook.sh")) == (0o700, 0o700)
    assert (mode(tmp_path / "x" / "conf.json"), mode(tmp_path / "x" / "kept.json")) == (0o600, 0o644)


def test_copy_tree_copies_what_is_not_skipped_privately(tmp_path: Path, open_umask: None) -> None:
    source = tmp_path / "src"
    (source / "scripts").mkdir(parents=True)
    (source / "__pycache__").mkdir()
    (source / "scripts" / "run.sh").write_text("echo")
    (source / "scripts" / "run.sh").chmod(0o777)
    (source / "plugin.json").write_text("{}")
    (source / "__pycache__" / "x.pyc").write_text("")
    copy_tree(source, tmp_path / "dst", skip=lambda p: p.name == "__pycache__",
              executable=lambda rel: rel.suffix == ".sh")
    got = {str(p.relative_to(tmp_path / "dst")): mode(p) for p in tree(tmp_path / "dst")[1:]}
    assert got == {"plugin.json": 0o600, "scripts": 0o700, "scripts/run.sh": 0o700}


def test_loose_finds_what_others_can_write_and_tighten_closes_only_that(tmp_path: Path) -> None:
    shared, mine, gone = tmp_path / "shared", tmp_path / "mine", tmp_path / "gone"
    shared.mkdir()
    shared.chmod(0o775)
    mine.mkdir(mode=0o755)
    mine.chmod(0o755)
    assert loose([shared, mine, gone]) == [shared]
    assert tighten([shared, mine, gone]) == [shared]
    assert (mode(shared), mode(mine)) == (0o755, 0o755) and loose([shared]) == []


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a folder to another user needs root")
def test_tighten_leaves_another_users_folder_for_doctor_to_report(tmp_path: Path) -> None:
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    os.chown(theirs, 65534, 65534)
    theirs.chmod(0o777)
    assert tighten([theirs]) == [] and loose([theirs]) == [theirs]
