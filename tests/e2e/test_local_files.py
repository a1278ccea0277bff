"""Another local user against talk's files: foreign or shared folders are refused, and a
symbolic link planted where talk keeps a file is never read or written through.

The tests run as root here, so "another user" is uid 65534 (nobody) made the owner with chown.
"""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path

import pytest

from tests.conftest import Agent, RelayProcess, Result, wait_for

OTHER_UID = 65534
VICTIM = b"the attacker's file, or one of yours the attacker points at\n"

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="chown to another user needs root")


def assert_refused(r: Result, *words: str) -> None:
    assert r.code == 1, f"exit {r.code}: {r.err}"
    lines = r.err.splitlines()
    assert len(lines) == 1 and "Traceback" not in r.err, r.err
    for word in words:
        assert word in lines[0], lines[0]


def victim(tmp_path: Path) -> Path:
    path = tmp_path / "victim"
    path.write_bytes(VICTIM)
    return path


@needs_root
def test_init_refuses_a_talk_home_another_user_created(tmp_path: Path, relay: RelayProcess) -> None:
    shared = tmp_path / "shared-tmp" / "talk"
    shared.mkdir(parents=True, mode=0o755)
    os.chown(shared, OTHER_UID, OTHER_UID)
    eve = Agent(shared, relay.url)
    assert_refused(eve.run("init", "eve", "--no-passphrase"), str(shared), "another user")
    assert os.listdir(shared) == []  # no keys were left where the other user can read them


@needs_root
def test_a_foreign_owned_talk_home_or_identity_folder_is_refused(bob: Agent) -> None:
    os.chown(bob.home, OTHER_UID, OTHER_UID)
    assert_refused(bob.run("id"), "TALK_HOME", "another user")
    os.chown(bob.home, 0, 0)
    os.chown(bob.home / "bob", OTHER_UID, OTHER_UID)
    assert_refused(bob.run("id"), "identity folder", "another user")
    os.chown(bob.home / "bob", 0, 0)
    bob.ok("id")


@pytest.mark.parametrize("mode", [0o770, 0o707, 0o777])
def test_a_talk_home_others_can_write_to_is_refused_with_what_to_do(bob: Agent, mode: int) -> None:
    bob.home.chmod(mode)
    assert_refused(bob.run("id"), f"chmod 700 {bob.home}")
    assert_refused(bob.run("send", "alice", "hi"), f"chmod 700 {bob.home}")
    bob.home.chmod(0o700)
    (bob.home / "bob").chmod(mode)
    assert_refused(bob.run("id"), f"chmod 700 {bob.home / 'bob'}")


def test_new_folders_are_private(bob: Agent) -> None:
    for folder in (bob.home, bob.home / "bob"):
        assert folder.stat().st_mode & 0o777 == 0o700


def test_a_planted_identity_json_link_is_refused_and_its_target_untouched(
    tmp_path: Path, bob: Agent
) -> None:
    real = bob.home / "bob" / "identity.json"
    target = victim(tmp_path)
    target.write_bytes(real.read_bytes())  # a look-alike identity the attacker controls
    planted = target.read_bytes()
    real.unlink()
    real.symlink_to(target)
    assert_refused(bob.run("id"), "identity.json", "symbolic link")
    assert_refused(bob.run("publish"), "symbolic link")
    assert target.read_bytes() == planted


def test_a_planted_link_for_a_state_file_is_replaced_never_written_through(
    tmp_path: Path, pair: tuple[Agent, Agent]
) -> None:
    _, bob = pair
    target = victim(tmp_path)
    config = bob.home / "bob" / "follower.json"
    config.symlink_to(target)
    bob.ok("follow", "--peer", "alice", "--no-push")
    bob.ok("stop")
    assert target.read_bytes() == VICTIM
    assert not config.is_symlink() and json.loads(config.read_text())["peers"] == ["alice"]


def mail_waiting(relay: RelayProcess, agent: Agent) -> int:
    fp = agent.ok("id", "--json").json()["fingerprint"]
    with sqlite3.connect(relay.db) as db:
        return int(db.execute("SELECT COUNT(*) FROM mail WHERE fp = ?", (fp,)).fetchone()[0])


@pytest.mark.own_relay
def test_a_planted_spool_link_is_refused_and_the_mail_waits_on_the_relay(
    tmp_path: Path, relay: RelayProcess, pair: tuple[Agent, Agent]
) -> None:
    alice, bob = pair
    target = victim(tmp_path)
    spool = bob.home / "bob" / "spool"
    spool.mkdir(mode=0o700)
    inbox = spool / "inbox.ndjson"
    inbox.symlink_to(target)
    bob.ok("follow", "--peer", "alice", "--no-push", "--interval", "0.3")
    try:
        msg = alice.ok("send", "bob", "secret for bob only", "--json").json()["id"]

        def refused() -> bool:
            error = bob.ok("status", "--json").json()["follower"].get("last_error") or ""
            return "symbolic link" in error and str(inbox) in error

        wait_for(refused, 20, "the follower to refuse the planted link")
        assert target.read_bytes() == VICTIM
        assert mail_waiting(relay, bob) == 1  # not acked: nothing was lost
        inbox.unlink()  # the user removes the link, as the error says
        wait_for(lambda: inbox.is_file() and msg in inbox.read_text(), 20, "delivery to the real inbox")
        assert not inbox.is_symlink() and inbox.stat().st_mode & 0o777 == 0o600
    finally:
        bob.run("stop")
    assert target.read_bytes() == VICTIM


def test_a_spool_folder_that_is_a_link_is_refused(tmp_path: Path, pair: tuple[Agent, Agent]) -> None:
    alice, bob = pair
    elsewhere = tmp_path / "attacker-spool"
    elsewhere.mkdir(mode=0o700)
    (bob.home / "bob" / "spool").symlink_to(elsewhere)
    bob.ok("follow", "--peer", "alice", "--no-push", "--interval", "0.3")
    try:
        alice.ok("send", "bob", "secret for bob only")

        def refused() -> bool:
            error = bob.ok("status", "--json").json()["follower"].get("last_error") or ""
            return "symbolic link" in error

        wait_for(refused, 20, "the follower to refuse the linked spool folder")
        assert os.listdir(elsewhere) == []
    finally:
        bob.run("stop")


def test_a_daemon_starting_while_others_look_at_its_lock_still_starts(tmp_path: Path) -> None:
    """`talk status`, `talk receive` and `talk follow` look at the follower's liveness lock; a
    follower starting at that instant once exited, saying another follower held it."""
    import threading

    from durable.locks import held_by_other, hold_for_life

    lock = tmp_path / "follower.lock"
    stop = threading.Event()

    def look() -> None:
        while not stop.is_set():
            held_by_other(lock)

    lookers = [threading.Thread(target=look) for _ in range(3)]
    for t in lookers:
        t.start()
    try:
        for _ in range(50):
            fd = hold_for_life(lock)
            assert fd is not None
            assert held_by_other(lock)  # and the lookers see it held
            os.close(fd)
    finally:
        stop.set()
        for t in lookers:
            t.join()
    fd = hold_for_life(lock)
    assert fd is not None and hold_for_life(lock, patience_s=0.05) is None  # a second one gives up
    os.close(fd)
