"""`talk unlock` and `talk lock`: the follower holds a protected identity's key for the commands
that follow, which then need neither the passphrase nor its key derivation, until `talk lock`
or the follower stops. Errors are one line with exit status 1 (durable.errors: UserError)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

import pytest

from follower.daemon.keyagent import SOCKET_FILE
from tests.conftest import Agent
from tests.e2e.probes import one_line


@pytest.fixture
def following(pair: tuple[Agent, Agent]) -> Iterator[tuple[Agent, Agent]]:
    """alice (passphrase-protected) with her follower running; bob without a passphrase."""
    alice, bob = pair
    alice.ok("follow")
    yield alice, bob
    alice.run("stop")


def without_passphrase(agent: Agent) -> Agent:
    return dataclasses.replace(agent, passphrase_file=None)


def test_unlocked_commands_need_no_passphrase_until_lock(following: tuple[Agent, Agent]) -> None:
    alice, bob = following
    bare = without_passphrase(alice)
    refused = bare.run("send", "bob", "before")
    assert refused.code == 1 and "protected by a passphrase" in refused.err

    assert alice.ok("unlock", "--json").json()["unlocked"] is True
    bare.ok("send", "bob", "while unlocked")
    assert [m["text"] for m in bob.ok("receive").lines()] == ["while unlocked"]

    assert alice.ok("lock", "--json").json() == {"locked": True, "was_unlocked": True}
    again = bare.run("send", "bob", "after")
    assert again.code == 1 and "protected by a passphrase" in again.err
    assert alice.ok("lock").out == "nothing was unlocked\n"


def test_stopping_the_follower_forgets_the_key(following: tuple[Agent, Agent]) -> None:
    alice, _ = following
    alice.ok("unlock")
    alice.ok("stop")
    assert not (alice.home / "alice" / SOCKET_FILE).exists()
    assert without_passphrase(alice).run("send", "bob", "after the stop").code == 1


def test_a_wrong_passphrase_is_one_line_and_holds_nothing(following: tuple[Agent, Agent]) -> None:
    alice, _ = following
    wrong = alice.home.parent / "wrong.pass"
    wrong.write_text("not it\n")
    wrong.chmod(0o600)
    r = alice.run("unlock", "--passphrase-file", str(wrong))
    assert r.code == 1 and "wrong passphrase" in r.err
    one_line(r.err)
    assert without_passphrase(alice).run("send", "bob", "still locked").code == 1


def test_unlock_without_a_follower_says_how_to_start_one(pair: tuple[Agent, Agent]) -> None:
    alice, _ = pair
    r = alice.run("unlock")
    assert r.code == 1 and "no follower is running for alice" in r.err and "talk follow" in r.err
    one_line(r.err)
    assert alice.ok("lock").out == "nothing was unlocked (no follower answered)\n"


def test_an_identity_without_a_passphrase_has_nothing_to_unlock(pair: tuple[Agent, Agent]) -> None:
    _, bob = pair
    r = bob.run("unlock")
    assert r.code == 1 and "has no passphrase" in r.err
    one_line(r.err)
