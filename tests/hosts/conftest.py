"""Fixtures of the host tests: alice and bob with talk's Claude Code plugin installed for bob, a
project folder, and a real `opencode serve` wired to bob with his alarm running."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REPO, TALK, Agent, RelayProcess, befriend, free_port, make_agent, wait_for
from tests.hosts.configs import write_opencode_config
from tests.hosts.fake_model import FakeModel
from tests.hosts.npm import host_env
from tests.hosts.opencode import WARM_S, OpencodeServer, Rig, alarm, kill9, marker
from tests.hosts.procs import ProcessGroup
from tests.hosts.talk_install import install_plugin


@pytest.fixture
def opencode_settings() -> dict[str, Any]:
    """Settings the rig's opencode.json adds to the fake provider; a test module overrides it."""
    return {}


@pytest.fixture
def rig(
    pair: tuple[Agent, Agent], host_bin: Path, fake_model: FakeModel, host_home: Path,
    host_procs: ProcessGroup, tmp_path: Path, opencode_settings: dict[str, Any],
) -> Iterator[Rig]:
    alice, bob = pair
    project = tmp_path / "project"  # no .opencode/ dir: it would make opencode wait on npm
    write_opencode_config(project, fake_model.url, opencode_settings)
    server = OpencodeServer(host_procs, host_bin, project, host_env(host_home), tmp_path / "oc-logs",
                            free_port())
    server.start()
    bob.ok("follow", "--peer", "alice")
    pids: list[int] = []
    try:
        started = alarm(bob, "opencode", "--url", server.url)
        pids.append(int(started["pid"]))
        r = Rig(alice, bob, fake_model, server, str(started["session"]), pids)
        wait_for(lambda: any(s["sid"] == r.sid and s["alive"] for s in
                             bob.ok("session", "list", "--json").json()), 30, "the session's registration")
        warm = marker("WARMUP")
        r.send(warm)
        fake_model.wait_for(warm, WARM_S)
        yield r
    finally:
        bob.run("stop")
        subprocess.run([TALK, "door", "stop", "opencode"], env=bob.env(), cwd=REPO,
                       capture_output=True, timeout=30)
        for pid in pids:
            kill9(pid)


@pytest.fixture
def following(tmp_path: Path, relay: RelayProcess) -> Iterator[tuple[Agent, Agent, Path]]:
    """alice and bob as contacts, bob's follower running, the plugin installed for bob."""
    alice = make_agent(tmp_path, relay, "alice", None)
    bob = make_agent(tmp_path, relay, "bob", None)
    befriend(alice, bob)
    bob.ok("follow", "--peer", "alice", "--json")
    try:
        yield alice, bob, install_plugin(tmp_path / "plugin", bob.home)
    finally:
        bob.run("stop")


@pytest.fixture
def project(tmp_path: Path) -> Path:
    path = tmp_path / "project"
    path.mkdir()
    return path
