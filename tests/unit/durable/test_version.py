"""durable.version: the one version of the project, read from the installed distribution."""

from __future__ import annotations

import tomllib

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
