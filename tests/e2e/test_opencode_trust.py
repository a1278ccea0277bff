"""Attack: while opencode is down, another user of the machine binds its port to catch the mail.

The opencode alarm speaks plain HTTP to a loopback port. Here the user's opencode (a stand-in
that records what it is sent) takes a first message; then it goes away and a listener run as
`nobody` takes the port. The real `talk door opencode` must hand that listener nothing, not
even a request, must not tell the sender the mail arrived, and must say in `talk status` whose
listener it found; once the user's own server is back, the kept mail reaches it.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Agent, RelayProcess, befriend, free_port, make_agent, wait_for
from tests.fake_opencode import NOBODY, FakeOpencode, fake_opencode

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="running a listener as another user needs root")

SID = "ses_trustcheck01"


def state(alice: Agent, msg_id: str) -> str:
    return str(alice.ok("status", msg_id, "--json").json()["state"])


def alarm_row(bob: Agent) -> dict[str, Any]:
    (row,) = bob.ok("status", "--json").json()["opencode_doors"]
    return dict(row)


def posted(fake: FakeOpencode, text: str) -> bool:
    return any(r["path"].endswith("/prompt_async") and text in r["body"] for r in fake.requests)


@pytest.fixture
def mail(tmp_path: Path, relay: RelayProcess) -> Iterator[tuple[Agent, Agent, int]]:
    """alice writes to bob, whose opencode session SID lives with a process of his own."""
    alice = make_agent(tmp_path, relay, "alice", None)
    bob = make_agent(tmp_path, relay, "bob", None)
    bob.extra_env = {"TALK_DEPOSIT_JITTER": "0.05,0.2"}
    befriend(alice, bob)
    host = subprocess.Popen(["sleep", "300"])
    bob.ok("session", "register", "--host", "opencode", "--id", SID, "--pid", str(host.pid))
    bob.ok("follow", "--peer", "alice")
    alice.ok("follow", "--peer", "bob")
    try:
        yield alice, bob, host.pid
    finally:
        bob.run("door", "stop", "opencode", "--session", SID)
        bob.run("stop")
        alice.run("stop")
        host.kill()
        host.wait()


def test_another_users_listener_on_the_port_gets_no_mail_and_the_sender_is_not_told_delivered(
    mail: tuple[Agent, Agent, int],
) -> None:
    alice, bob, host_pid = mail
    port = free_port()
    with fake_opencode(port) as own:
        bob.ok("door", "opencode", "--url", own.url, "--session", SID, "--pid", str(host_pid))
        first = alice.ok("send", "bob", "first, to my own opencode", "--json").json()["id"]
        wait_for(lambda: posted(own, "first, to my own opencode"), 20, "the user's opencode to get mail")
        wait_for(lambda: state(alice, first) == "written", 15, "the written receipt")

    with fake_opencode(port, uid=NOBODY) as impostor:
        second = alice.ok("send", "bob", "the secret plan", "--json").json()["id"]
        row = wait_for(lambda: (r := alarm_row(bob))["outbox"] == 1 and "nobody" in (r["last_error"] or "")
                       and r, 20, "the alarm to refuse the impostor")
        assert row["state"] == "waiting for opencode" and row["running"]
        human = bob.ok("status").out
        assert "belongs to nobody (uid 65534), not to you: talk hands it no mail" in human
        assert len([x for x in human.splitlines() if "last error" in x]) == 1
        (check,) = [c for c in bob.run("doctor", "--json").json() if c["name"] == "opencode"]
        assert check["status"] == "warn" and "belongs to nobody (uid 65534)" in check["detail"]
        # A control, so the silence below means something: the impostor records what reaches it.
        import urllib.request

        urllib.request.urlopen(f"{impostor.url}/probe", timeout=5).read()
        wait_for(lambda: impostor.requests, 5, "the impostor to record the probe")
        assert [r["path"] for r in impostor.requests] == ["/probe"], impostor.requests
        assert state(alice, second) == "spooled"

    with fake_opencode(port) as back:
        wait_for(lambda: posted(back, "the secret plan"), 20, "the kept mail to reach the user's opencode")
        wait_for(lambda: state(alice, second) == "written", 15, "the written receipt")
