"""Fixtures of the e2e tests: a small disk that can be filled (a tmpfs; root only)."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from keys.identity import Identity
from tests.conftest import Agent, RelayProcess, befriend, make_agent
from tests.peer_forge import identity_of


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("mounting a tmpfs needs root")
    disk = tmp_path / "disk"
    disk.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m,mode=0700", "tmpfs", str(disk)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield disk
    finally:
        subprocess.run(["umount", "-l", str(disk)], capture_output=True)


def fill(disk: Path) -> Path:
    """Take every free byte of the disk; returns the file that holds them."""
    filler = disk / "filler"
    with open(filler, "wb") as f:
        try:
            while True:
                f.write(b"\0" * 65536)
                f.flush()
        except OSError:
            pass
    return filler


@pytest.fixture
def duo(tmp_path: Path, relay: RelayProcess) -> tuple[Agent, Agent, Identity]:
    """alice and bob by invite, both without passphrase; alice's identity to forge with."""
    alice = make_agent(tmp_path, relay, "alice", None)
    bob = make_agent(tmp_path, relay, "bob", None)
    befriend(alice, bob)
    return alice, bob, identity_of(alice.home, "alice")


@pytest.fixture
def duo_following(duo: tuple[Agent, Agent, Identity]) -> Iterator[tuple[Agent, Agent, Identity]]:
    """`duo`, with bob's follower taking alice's mail."""
    bob = duo[1]
    bob.ok("follow", "--peer", "alice")
    try:
        yield duo
    finally:
        bob.run("stop")
