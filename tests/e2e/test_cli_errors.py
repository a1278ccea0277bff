"""Faults of this machine end in one line and a documented exit status, never a traceback: a
TALK_HOME that cannot be one, a full disk under `talk send`, a relay port in use, a Redis store
that does not answer (and the relay never says it listens when it does not)."""

from __future__ import annotations

import socket
import subprocess
from pathlib import Path

import pytest

from tests.conftest import TALK, Agent, RelayProcess, befriend, free_port, make_agent
from tests.e2e.conftest import fill
from tests.e2e.probes import one_line


@pytest.mark.parametrize("home", ["/proc/self/talk-home", "/etc/hostname", "FILE/sub", "FILE"])
def test_a_talk_home_that_cannot_be_one_is_one_line(tmp_path: Path, home: str) -> None:
    (tmp_path / "FILE").write_text("a file, not a folder\n")
    target = home.replace("FILE", str(tmp_path / "FILE"))
    agent = Agent(Path(target), "http://127.0.0.1:9")
    r = agent.run("init", "x", "--no-passphrase")
    assert r.code == 1
    one_line(r.err)
    assert (tmp_path / "FILE").read_text() == "a file, not a folder\n"


def test_a_full_disk_under_talk_send_is_one_line_and_queues_nothing_half(
    tmp_path: Path, relay: RelayProcess, small_disk: Path
) -> None:
    alice = Agent(small_disk / "home-alice", relay.url)
    alice.ok("init", "alice", "--no-passphrase")
    bob = make_agent(tmp_path, relay, "bob", None)
    befriend(alice, bob)
    outbox_before = (small_disk / "home-alice" / "alice" / "outbox.ndjson").read_bytes() \
        if (small_disk / "home-alice" / "alice" / "outbox.ndjson").exists() else b""
    filler = fill(small_disk)
    r = alice.run("send", "bob", "x" * 20000)
    assert r.code == 1
    one_line(r.err)
    assert "space" in r.err.lower()
    filler.unlink()
    outbox = small_disk / "home-alice" / "alice" / "outbox.ndjson"
    data = outbox.read_bytes() if outbox.exists() else b""
    assert data.startswith(outbox_before) and (data == outbox_before or data.endswith(b"\n"))
    assert alice.ok("send", "bob", "after", "--json").json()["state"] == "stored"
    assert [m["text"] for m in bob.ok("receive").lines()][-1] == "after"


def test_a_relay_port_in_use_is_one_line_and_never_said_to_listen(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        p = subprocess.run([TALK, "relay", "--port", str(port), "--db", str(tmp_path / "r.db")],
                           capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL)
    assert p.returncode == 1
    one_line(p.stderr)
    assert "listening" not in p.stderr and "--port" in p.stderr
    assert not (tmp_path / "r.db").exists()


def test_an_unreachable_redis_is_one_line_and_never_said_to_listen() -> None:
    p = subprocess.run([TALK, "relay", "--port", str(free_port()), "--store", "redis://127.0.0.1:1/0"],
                       capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL)
    assert p.returncode == 1
    one_line(p.stderr)
    assert "listening" not in p.stderr and "Redis" in p.stderr
