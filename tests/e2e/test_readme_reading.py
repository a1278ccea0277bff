"""The README's "Reading your mail as a person" section, walked through as a new user would: each
`bob$` line of its example, in order, through the real `talk`, with the example's ids swapped for
the ids this run made. A command that stops working, or a new line nobody tried, fails here."""

from __future__ import annotations

import re
import select
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from tests.conftest import REPO, TALK, Agent, RelayProcess, befriend, make_agent, wait_for

SECTION = "### Reading your mail as a person"
EXAMPLE_SENT, EXAMPLE_RECEIVED = "53273e0f", "d563f3125106"  # the ids the README's example uses


def readme_commands() -> list[list[str]]:
    """The `bob$` lines of the section's first shell block, as argv lists without comments."""
    text = (REPO / "README.md").read_text()
    block = text.split(SECTION, 1)[1].split("```sh", 1)[1].split("```", 1)[0]
    lines = [re.sub(r"\s+#.*$", "", line) for line in block.splitlines() if line.startswith("bob$")]
    return [line.removeprefix("bob$").split() for line in lines]


def prints(agent: Agent, argv: list[str], needle: str, then: Callable[[], object]) -> bool:
    """Start a command that runs until Ctrl-C, do `then`, and say whether a line holding `needle`
    came within 30 s; the command is stopped with SIGINT either way."""
    # Unbuffered: a buffered reader may hold the next lines where select() cannot see them.
    proc = subprocess.Popen([TALK, *argv[1:]], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            stdin=subprocess.DEVNULL, env=agent.env(), bufsize=0)
    assert proc.stdout is not None
    try:
        then()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if select.select([proc.stdout], [], [], 1)[0]:
                line = proc.stdout.readline().decode()
                if needle in line:
                    return True
                if not line:
                    return False
        return False
    finally:
        proc.send_signal(signal.SIGINT)
        code = proc.wait(timeout=30)
        proc.stdout.close()
        assert code in (0, 130, -signal.SIGINT), code


def test_every_command_of_the_section_works_as_the_readme_says(tmp_path: Path, relay: RelayProcess) -> None:
    alice, bob = (make_agent(tmp_path, relay, n, None) for n in ("alice", "bob"))
    carol = make_agent(tmp_path, relay, "carol", None)
    befriend(alice, bob)
    befriend(bob, carol)
    commands = readme_commands()
    assert [c[:2] for c in commands] == [["talk", "follow"], ["talk", "show"], ["talk", "show"],
                                         ["talk", "show"], ["talk", "show"], ["talk", "status"],
                                         ["talk", "forward"]], commands
    try:
        bob.ok(*commands[0][1:])
        received = alice.ok("send", "bob", "the build is green", "--json").json()["id"]
        sent = bob.ok("send", "alice", "on it", "--json").json()["id"]
        ids = {EXAMPLE_SENT: sent[:8], EXAMPLE_RECEIVED: received[:12]}
        wait_for(lambda: received[:12] in bob.ok("show", "alice").out, 30, "alice's message in the spool")

        # Past the note bob's `talk receive` took when he joined: it opens the conversation.
        conversation = [line for line in bob.ok(*commands[1][1:]).out.splitlines()
                        if "[contact_accepted]" not in line]
        assert sorted(" ".join(line.split()[3:5]) for line in conversation) == ["from alice", "to alice"]
        assert "new" in next(line for line in conversation if "from alice" in line)
        everyone = bob.ok(*commands[2][1:]).out
        assert received[:12] in everyone and sent[:12] in everyone
        unread = bob.ok(*commands[3][1:]).out
        assert received[:12] in unread and sent[:12] not in unread
        assert prints(bob, commands[4], "a later note", lambda: alice.ok("send", "bob", "a later note"))
        status = bob.ok(*[ids.get(a, a) for a in commands[5][1:]], "--json").json()
        assert status["id"] == sent and status["state"] in ("stored", "spooled", "written", "delivered")
        forwarded = bob.ok(*[ids.get(a, a) for a in commands[6][1:]], "--json").json()
        assert forwarded["to"] == "carol"
        got = wait_for(lambda: carol.ok("receive").lines(), 30, "the forwarded message at carol")
        assert got[0]["text"] == "(forwarded from alice) the build is green"
    finally:
        bob.run("stop")
