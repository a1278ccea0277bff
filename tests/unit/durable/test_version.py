"""durable.version: the one version of the project, read from the installed distribution."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

import durable.version
from tests.conftest import REPO

PYPROJECT = REPO / "pyproject.toml"


def test_the_version_is_the_one_pyproject_gives() -> None:
    project = tomllib.loads(PYPROJECT.read_text())["project"]
    assert project["name"] == durable.version.DISTRIBUTION
    # An installed distribution's metadata is pyproject's as of the last `pip install -e .`.
    assert durable.version.version() == project["version"]


def test_a_source_tree_never_installed_has_a_version_no_release_has(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(durable.version, "DISTRIBUTION", "talk-mailbox-never-installed")
    durable.version.version.cache_clear()
    try:
        assert durable.version.version() == durable.version.UNINSTALLED
    finally:
        monkeypatch.undo()
        durable.version.version.cache_clear()


def test_the_version_is_read_without_importlib_metadata() -> None:
    # importlib.metadata would hold about a megabyte of a relay's memory for one line.
    code = "import sys, durable.version as v; print(v.version(), 'importlib.metadata' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == [tomllib.loads(PYPROJECT.read_text())["project"]["version"], "False"]


def test_the_version_field_is_read_from_the_first_dist_info_on_the_path(tmp_path: Path) -> None:
    first, second = tmp_path / "a", tmp_path / "b"
    for folder, number in ((first, "1.2.3"), (second, "9.9.9")):
        info = folder / f"talk_mailbox-{number}.dist-info"
        info.mkdir(parents=True)
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: talk-mailbox\nVersion: {number}\n\n"
                                       "Version: not this, the description\n")
    path = [str(tmp_path / "missing"), str(first), str(second)]
    assert durable.version._dist_info_version("talk-mailbox", path) == "1.2.3"
    assert durable.version._dist_info_version("talk-mailbox", [str(tmp_path)]) is None
