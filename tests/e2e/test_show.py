"""`talk show`: the conversation view, through the real `talk` with real followers and a relay.

Mail moves as it does for agents: followers take it into the spool and send receipts back, and
the "door" that hands a message to an agent is `alarms.mailbox.SessionMail.take`, the call the
hosts' hooks make, so sent mail reaches "delivered" for real. Or, as a person starts, with
`talk receive`, which prints the mail and never spools it.

Every pair became contacts by invite, and each side's `talk receive` took the note that says
so: it opens each conversation (`opening`); most tests look past it (`shown`, `plain`).
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import time
from collections.abc import Iterator
from typing import Any

import pytest

from alarms.mailbox import SessionMail
from follower.history.receivelog import RECEIVE_LOG_FILE
from follower.relay.client import RelayClient
from follower.send.outbound import resend_due
from follower.send.outbox import Outbox
from tests.conftest import TALK, Agent, RelayProcess, wait_for
from tests.e2e.terminal import on_a_terminal

ATTACK = "\x1b]0;pwned\x07\x1b[2J"
SHOWN_ATTACK = "\\x1b]0;pwned\\x07\\x1b[2J"  # as printable() writes it: visible, inert


@pytest.fixture
def talking(pair: tuple[Agent, Agent]) -> Iterator[tuple[Agent, Agent]]:
    """alice and bob, each with a follower: mail lands in the spool and receipts come back."""
    alice, bob = pair
    for agent in pair:  # receipts leave at most 0.2 s after their cause (not up to 2 s)
        agent.extra_env = {"TALK_DEPOSIT_JITTER": "0.05,0.2"}
    bob.ok("follow", "--peer", "alice")
    alice.ok("follow", "--peer", "bob")
    try:
        yield alice, bob
    finally:
        bob.run("stop")
        alice.run("stop")


def send(sender: Agent, to: str, *args: str) -> str:
    return str(sender.ok("send", to, *args, "--json").json()["id"])


def state(sender: Agent, msg_id: str) -> str:
    return str(sender.ok("status", msg_id, "--json").json()["state"])


def arrived(sender: Agent, msg_id: str, *states: str) -> None:
    wanted = states or ("spooled", "delivered")
    wait_for(lambda: state(sender, msg_id) in wanted, 20, f"{msg_id} to reach {wanted}")


NOTE = "contact_accepted"  # the kind of the note that opens each conversation


def opening(agent: Agent, *args: str) -> list[dict[str, Any]]:
    """`talk show --json`'s rows, the opening note among them."""
    rows: list[dict[str, Any]] = agent.ok("show", *args, "--json").json()
    return rows


def shown(agent: Agent, *args: str) -> list[dict[str, Any]]:
    return [row for row in opening(agent, *args) if row["kind"] != NOTE]


def plain(agent: Agent, *args: str) -> list[str]:
    """`talk show`'s lines as a script reads them, without the opening note's."""
    return [line for line in agent.ok("show", *args).out.splitlines() if f"[{NOTE}]" not in line]


def test_both_directions_interleave_in_time_with_the_state_of_each_sent_message(
    talking: tuple[Agent, Agent],
) -> None:
    alice, bob = talking
    host = subprocess.Popen(["sleep", "300"])  # an agent session of bob's, alive while this runs
    try:
        bob.ok("session", "register", "--host", "claude", "--id", "s1", "--pid", str(host.pid))
        one = send(alice, "bob", "one")
        arrived(alice, one)
        assert [m["id"] for m in SessionMail(bob.home / "bob", "s1").take()] == [one]  # an agent has it
        two = send(bob, "alice", "two")
        arrived(bob, two)
        three = send(alice, "bob", "three\nwith a second line")
        arrived(alice, three)
        arrived(alice, one, "delivered")
        assert [r["id"] for r in shown(bob, "alice")] == [one, two, three]
        # show read bob's spool while his follower ran, and moved no agent's cursor:
        assert [m["id"] for m in SessionMail(bob.home / "bob", "s1").take()] == [three]
        arrived(alice, three, "delivered")
    finally:
        host.kill()
        host.wait()
    rows = shown(alice, "bob")
    assert [(r["id"], r["dir"], r["state"], r["text"]) for r in rows] == [
        (one, "out", "delivered", "one"), (two, "in", None, "two"),
        (three, "out", "delivered", "three\nwith a second line")]
    assert [r["ts"] for r in rows] == sorted(r["ts"] for r in rows)
    lines = plain(alice, "bob")
    assert [line.split()[2:5] for line in lines] == [
        [one[:12], "to", "bob"], [two[:12], "from", "bob"], [three[:12], "to", "bob"]]
    assert "delivered" in lines[0] and "new" in lines[1] and lines[2].endswith("three …")
    assert "\x1b" not in alice.ok("show", "bob").out  # plain text off a terminal
    full = alice.ok("show", "bob", "--full").out
    assert "three\n" in full and full.rstrip().endswith("with a second line")
    everyone = shown(bob)  # every contact: one timeline
    assert [(r["id"], r["state"]) for r in everyone] == [(one, None), (two, "spooled"), (three, None)]


def test_held_mail_is_marked_on_both_sides(talking: tuple[Agent, Agent]) -> None:
    alice, bob = talking
    bob.ok("policy", "alice", "hold", "--yes")
    kept = send(alice, "bob", "hold me")
    arrived(alice, kept, "held")
    (mine,) = shown(bob, "alice")
    assert (mine["id"], mine["held"], mine["unread"], mine["text"]) == (kept, True, True, "hold me")
    assert "held, new" in bob.ok("show", "alice").out and "until the recipient accepts" in mine["reason"]
    (theirs,) = shown(alice, "bob")
    assert (theirs["state"], theirs["held"]) == ("held", False) and theirs["reason"]
    bob.ok("held", "accept", kept, "--yes")
    arrived(alice, kept)
    (released,) = shown(bob, "alice")
    assert (released["id"], released["held"]) == (kept, False)


def test_tasks_show_with_their_status_next_to_the_messages_that_carried_them(
    talking: tuple[Agent, Agent],
) -> None:
    alice, bob = talking
    bob.ok("policy", "alice", "accept", "--tasks", "--yes")
    asked = alice.ok("send", "bob", "--task", "count the tests", "--json").json()
    arrived(alice, asked["id"])
    before = shown(bob, "alice")
    assert [(r["kind"], r["task"], r["task_status"]) for r in before] == [("task", asked["task"], "open")]
    bob.ok("reply", asked["task"], "--status", "done", "--summary", "612 tests")
    wait_for(lambda: len(shown(alice, "bob")) == 2, 20, "bob's result")
    task, result = shown(alice, "bob")
    assert (task["dir"], task["kind"], task["task_status"]) == ("out", "task", "done")
    assert (result["dir"], result["kind"], result["task"], result["task_status"]) == (
        "in", "result", asked["task"], "done")
    lines = plain(alice, "bob")
    assert lines[0].endswith(f"[task {asked['task']}: done] count the tests")
    assert lines[1].endswith(f"[result {asked['task']}: done] 612 tests")


def test_unread_marks_move_only_when_asked_or_seen_on_a_terminal(talking: tuple[Agent, Agent]) -> None:
    alice, bob = talking
    first = send(alice, "bob", "first")
    arrived(alice, first)
    assert [r["unread"] for r in shown(bob, "alice")] == [True]
    assert [r["unread"] for r in shown(bob, "alice")] == [True]  # a script's look marks nothing
    assert "new" in bob.ok("show", "alice").out
    done = bob.ok("show", "alice", "--mark-read")
    assert done.out.strip() == "marked alice's messages read"
    assert [r["unread"] for r in shown(bob, "alice")] == [False]
    assert bob.ok("show", "alice", "--unread").out.strip() == "no unread messages with alice"
    assert bob.ok("show", "alice", "--mark-read", "--json").json() == {"marked": 0}
    second = send(alice, "bob", "second")
    mine = send(bob, "alice", "mine")
    arrived(alice, second)
    assert [r["id"] for r in shown(bob, "alice", "--unread")] == [second]
    code, screen = on_a_terminal(bob, "show", "alice", "--peek", typed=[])
    assert code == 0 and "second" in screen
    assert [r["id"] for r in shown(bob, "alice", "--unread")] == [second]  # --peek marks nothing
    code, screen = on_a_terminal(bob, "show", "alice", typed=[])
    assert code == 0 and "second" in screen and mine[:12] in screen
    assert shown(bob, "alice", "--unread") == []  # a person saw it


def test_on_a_terminal_a_coloured_table_and_peer_escapes_are_neutralised_everywhere(
    talking: tuple[Agent, Agent],
) -> None:
    alice, bob = talking
    attack = send(alice, "bob", f"look {ATTACK}here\nline two {ATTACK}")
    arrived(alice, attack)
    bob.extra_env = {**bob.extra_env, "TERM": "xterm-256color", "COLUMNS": "200"}
    code, screen = on_a_terminal(bob, "show", "alice", "--full", typed=[])
    assert code == 0, screen
    assert "\x1b[" in screen and "TIME" in screen and "STATE" in screen  # rich: colours, a header
    assert "\x1b]0;pwned" not in screen and "\x07" not in screen and "\x1b[2J" not in screen
    assert screen.count(SHOWN_ATTACK) == 2
    text = bob.ok("show", "alice", "--full").out
    assert "\x1b" not in text and "\x07" not in text and text.count(SHOWN_ATTACK) == 2
    raw = bob.ok("show", "alice", "--json").out
    assert "\x1b" not in raw and shown(bob, "alice")[0]["text"] == f"look {ATTACK}here\nline two {ATTACK}"


def ids(taken: list[dict[str, Any]]) -> list[str]:
    return [str(m["id"]) for m in taken]


def test_mail_taken_with_receive_shows_both_ways_in_time_unread_until_marked(
    pair: tuple[Agent, Agent],
) -> None:
    alice, bob = pair  # no follower: bob takes his mail as the quick start says
    one = send(alice, "bob", "one")
    assert ids(bob.ok("receive").lines()) == [one]
    two = send(bob, "alice", "two")
    three = send(alice, "bob", "three")
    assert ids(bob.ok("receive", "--peer", "alice").lines()) == [three]  # typer's path as well
    note, *rows = opening(bob, "alice")
    assert (note["kind"], note["dir"], note["text"]) == (NOTE, "in", "alice accepted your contact request")
    assert [(r["id"], r["dir"], r["state"], r["unread"]) for r in rows] == [
        (one, "in", None, True), (two, "out", "stored", False), (three, "in", None, True)]
    assert [r["ts"] for r in rows] == sorted(r["ts"] for r in rows)
    assert [line.split()[2:6] for line in plain(bob, "alice")] == [
        [one[:12], "from", "alice", "new"], [two[:12], "to", "alice", "stored"],
        [three[:12], "from", "alice", "new"]]
    assert bob.ok("show", "alice", "--mark-read").out.strip() == "marked alice's messages read"
    assert [r["unread"] for r in opening(bob, "alice")] == [False] * 4
    assert not any(bob.home.glob("bob/spool/**/*.ndjson"))  # no alarm gets it a second time
    log = bob.run("log")
    assert log.code == 0 and log.out == "" and "`talk show` lists it" in log.err


def test_a_message_taken_twice_shows_once(pair: tuple[Agent, Agent], relay: RelayProcess) -> None:
    alice, bob = pair
    crossed = send(alice, "bob", "crossed")
    assert ids(bob.ok("receive").lines()) == [crossed]
    # alice has not heard bob's receipt: her resend (the same id and blob) crosses it.
    with RelayClient(relay.url) as client:
        assert resend_due(client, Outbox(alice.home / "alice"), time.time() + 10**6, 0.0) >= 1
    assert bob.ok("receive").lines() == []
    # A reader of bob's output that is gone: the message is kept, then not printed nor acked ...
    cut = send(alice, "bob", "cut off")
    reader, writer = os.pipe()
    os.close(reader)
    try:
        gone = subprocess.run([TALK, "receive"], env=bob.env(), stdin=subprocess.DEVNULL, stdout=writer,
                              stderr=subprocess.PIPE, timeout=30)
    finally:
        os.close(writer)
    assert gone.returncode == 0 and b"Traceback" not in gone.stderr
    assert ids(bob.ok("receive").lines()) == [cut]  # ... so it comes again
    lines = (bob.home / "bob" / RECEIVE_LOG_FILE).read_text().splitlines()
    kept = [json.loads(line)["id"] for line in lines]
    assert (kept.count(crossed), kept.count(cut)) == (1, 2)
    assert [r["id"] for r in shown(bob, "alice")] == [crossed, cut]
    assert [r["id"] for r in shown(bob)] == [crossed, cut]


class Screen:
    """What a running `talk show -f` printed so far. Reads the pipe itself: a buffered reader
    would hold lines that select() then never reports."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        assert proc.stdout is not None
        self.fd, self.seen = proc.stdout.fileno(), b""

    def line_with(self, *parts: str, timeout: float = 30) -> str:
        """The first line that holds all of `parts`, once it is printed."""
        deadline = time.monotonic() + timeout
        while True:
            found = [x for x in self.seen.decode().splitlines(keepends=True)
                     if x.endswith("\n") and all(p in x for p in parts)]
            if found:
                return found[0]
            ready, _, _ = select.select([self.fd], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                raise AssertionError(f"no line with {parts!r} in {timeout} s; got {self.seen!r}")
            chunk = os.read(self.fd, 65536)
            if not chunk:
                raise AssertionError(f"talk show ended before a line with {parts!r}; got {self.seen!r}")
            self.seen += chunk


def following(agent: Agent, *args: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen([TALK, "show", *args], env=agent.env(), stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def stop(proc: subprocess.Popen[bytes]) -> None:
    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=10)


def test_follow_prints_mail_that_comes_after_it_started_and_sent_mail_as_its_state_moves(
    talking: tuple[Agent, Agent],
) -> None:
    alice, bob = talking
    early = send(alice, "bob", "early")
    arrived(alice, early)
    proc = following(bob, "alice", "--follow")
    try:
        screen = Screen(proc)
        screen.line_with("early")  # its first read is done
        late = send(alice, "bob", "late")
        assert "from alice" in screen.line_with(late[:12], "late")
        alice.ok("stop")  # bob's next message waits on the relay, "stored", until she is back
        reply = send(bob, "alice", "my answer")
        assert "to alice" in screen.line_with(reply[:12], "stored", "my answer")
        alice.ok("follow", "--peer", "bob")
        screen.line_with(reply[:12], "spooled", "my answer")  # the same message, its state moved
    finally:
        stop(proc)
    as_json = following(bob, "alice", "-f", "--json")
    try:
        screen = Screen(as_json)
        screen.line_with('"text": "my answer"}')  # one object per line: NDJSON
        send(alice, "bob", "as json")
        screen.line_with('"dir": "in"', '"text": "as json"}')
    finally:
        stop(as_json)


def test_bad_input_is_one_clear_line_and_exit_1(alice: Agent, bob: Agent) -> None:
    alice_fp = alice.ok("id", "--json").json()["fingerprint"]
    bob.ok("add", alice_fp, "--name", "alice")  # a contact by fingerprint: no note, nothing yet
    for args, says in [(["nobody"], "no contact 'nobody'"), (["alice", "--limit", "-1"], "--limit"),
                       (["alice", "--limit", "many"], "Invalid value for '--limit'")]:
        r = bob.run("show", *args)
        assert r.code == 1 and says in r.err and "Traceback" not in r.err, (args, r.err)
    r = bob.run("show", "nobody")
    assert r.err.strip().count("\n") == 0 and r.out == ""
    assert bob.ok("show", "alice").out.strip() == "no messages with alice yet"
    assert shown(bob) == []
