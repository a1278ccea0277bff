"""`talk doctor` against a real relay: each check says ok, warn or fail, and each problem comes
with the command that fixes it; the exit status is 1 only when something failed."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from tests.conftest import Agent, RelayProcess, free_port


def own_home(agent: Agent) -> Agent:
    """The agent with a HOME of its own: doctor reads the host programs' configs under HOME, and
    what the machine's real user has installed must not change these results."""
    home = agent.home.parent / f"{agent.home.name}-user"
    home.mkdir(exist_ok=True)
    return dataclasses.replace(agent, extra_env={**agent.extra_env, "HOME": str(home)})


def checks(agent: Agent, *args: str) -> tuple[int, dict[str, dict[str, Any]]]:
    r = own_home(agent).run("doctor", "--json", *args)
    assert "Traceback" not in r.err, r.err
    return r.code, {c["name"]: c for c in r.json()}


def test_doctor_walks_from_nothing_to_all_wired(tmp_path: Path, pair: tuple[Agent, Agent]) -> None:
    _, bob = pair
    nobody = Agent(tmp_path / "home-nobody", bob.relay_url)
    code, found = checks(nobody)
    assert code == 1 and found["identity"]["status"] == "fail" and "talk init" in found["identity"]["fix"]

    code, found = checks(bob)
    assert code == 0, found
    wired = ("identity", "relay", "clock", "keys", "sessions", "spool", "disk")
    assert {k: found[k]["status"] for k in wired} == dict.fromkeys(wired, "ok")
    assert found["follower"]["status"] == "warn" and found["follower"]["fix"] == "talk follow"

    bob.ok("follow", "--peer", "alice")
    try:
        code, found = checks(bob)
        assert code == 0 and found["follower"]["status"] == "ok" and "alice" in found["follower"]["detail"]
        problems = own_home(bob).ok("doctor", "--problems").out
        assert "follower" not in problems
    finally:
        bob.run("stop")


def test_doctor_says_the_relay_is_not_answering_and_exits_1(tmp_path: Path, relay: RelayProcess) -> None:
    bob = Agent(tmp_path / "home-bob", relay.url)
    bob.ok("init", "bob", "--no-passphrase")
    dead = f"http://127.0.0.1:{free_port()}"
    code, found = checks(bob, "--relay", dead)
    assert code == 1 and found["relay"]["status"] == "fail" and "--relay URL" in found["relay"]["fix"]
    assert "keys" not in found  # nothing more to ask a relay that does not answer
    human = own_home(bob).run("doctor", "--relay", dead)
    assert human.code == 1 and human.out.startswith("ok    identity: bob") and "fail  relay:" in human.out
