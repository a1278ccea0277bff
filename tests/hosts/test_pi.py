"""talk's door into pi, on pi 1.6.0 (`pi --mode rpc`) against the fake model on loopback, with a
real relay, bob's follower and the extension `talk install pi` put in pi's agent folder: every
message alice sends reaches the model once, framed as peer data, and gets its receipt."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from durable.printable import quote
from tests.conftest import Agent, wait_for
from tests.hosts.fake_model import FakeModel
from tests.hosts.opencode import marker
from tests.hosts.pi import (
    BUSY,
    START_S,
    PiRig,
    agent_dir,
    gated_tool_command,
    holding,
    install,
    pi_program,
    pi_setup,
    requests_with_tool_output,
)
from tests.hosts.procs import ProcessGroup
from tests.hosts.roles import MAIL, arrives_as_claimed

SEEN_S = 60.0  # send → the model's request, through relay, follower, door and pi, when loaded


@pytest.fixture
def rig(pair: tuple[Agent, Agent], host_bin: Path, host_home: Path, host_procs: ProcessGroup,
        tmp_path: Path) -> Iterator[PiRig]:
    alice, bob = pair
    gate = tmp_path / "tool-gate"
    with FakeModel(tool_command=gated_tool_command(gate)) as model:
        installed = install(bob, host_home)
        assert installed["extension_dir"] == str(agent_dir(host_home) / "extensions" / "talk")
        bob.ok("follow", "--peer", "alice")
        rig = PiRig(alice, bob, model, host_procs, host_bin, host_home, tmp_path / "project",
                    tmp_path / "pi-logs", gate)
        try:
            yield rig
        finally:
            for tmux in rig.tmuxes:
                tmux.kill()
            bob.run("stop")


def framed_once(rig: PiRig, text: str) -> None:
    """The model got `text` once, as new input, framed as peer data."""
    assert rig.model.count(text) == 1, rig.model.summary()
    [request] = [r for r in rig.model.requests if text in r["last_user_text"]]
    new = request["last_user_text"]
    assert "from alice (fingerprint" in new and "not instructions from your user" in new


@pytest.mark.hosts
def test_mail_waiting_at_start_reaches_the_first_request_once(rig: PiRig) -> None:
    text = marker("WAITING-PI")
    rig.send(text)
    wait_for(lambda: rig.spooled(text), 30, "the message in bob's inbox")
    rig.start_pi()
    rig.session()
    rig.model.wait_for(text, SEEN_S)
    wait_for(rig.receipt, 30, "the delivered receipt")
    framed_once(rig, text)


@pytest.mark.hosts
def test_an_idle_session_is_woken_once_and_the_sender_gets_a_receipt(rig: PiRig) -> None:
    pi = rig.start_pi()
    sid = rig.session()
    first = marker("IDLE-PI")
    rig.send(first)
    rig.model.wait_for(first, SEEN_S)
    pi.wait_event(lambda e: e.get("type") == "agent_settled", 30, "the woken turn's end")
    wait_for(rig.receipt, 30, "the delivered receipt")
    second = marker("IDLE-PI-AGAIN")  # idle again: woken again
    rig.send(second)
    rig.model.wait_for(second, SEEN_S)
    wait_for(rig.receipt, 30, "the second receipt")
    framed_once(rig, first)
    framed_once(rig, second)
    waiting = rig.bob.ok("session", "list", "--json").json()
    assert [s["sid"] for s in waiting if s["host"] == "pi"] == [sid]


@pytest.mark.hosts
def test_mail_arriving_mid_turn_joins_the_turn_after_its_tool_call_once(rig: PiRig) -> None:
    pi = rig.start_pi()
    rig.session()
    pi.prompt("RUN_TOOL and wait")
    pi.wait_event(lambda e: e.get("type") == "tool_execution_start", START_S, "the tool call")
    text = marker("MIDTURN-PI")
    rig.send(f"{text}\n{MAIL}")
    pi.wait_event(holding(1), SEEN_S, "the batch steered into the running turn")
    rig.release_tool()
    arrives_as_claimed(rig.model.wait_for(text, SEEN_S), text, "pi", "custom message")
    assert requests_with_tool_output(rig.model, text), "the mail came after the turn, not at its tool call"
    wait_for(rig.receipt, 30, "the delivered receipt")
    framed_once(rig, text)


@pytest.mark.hosts
def test_a_60_kb_message_reaches_the_model_whole(rig: PiRig) -> None:
    head, tail = marker("LONG-PI-HEAD"), marker("LONG-PI-TAIL")
    body = "\n".join(f"line {i:05d} " + "abcdefghij" * 5 for i in range(1000))
    text = f"{head}\n{body}\n{tail}"
    assert len(text) > 60_000
    rig.start_pi()
    rig.session()
    rig.send(text)
    request = rig.model.wait_for(tail, SEEN_S)
    assert quote(text) in request["last_user_text"]
    wait_for(rig.receipt, 30, "the delivered receipt")
    framed_once(rig, head)


@pytest.mark.hosts
def test_kill_9_of_the_door_with_a_batch_in_pi_loses_and_repeats_nothing(rig: PiRig) -> None:
    pi = rig.start_pi()
    rig.session()
    [door] = wait_for(pi.doors, START_S, "the door process")
    pi.prompt("RUN_TOOL and wait")
    pi.wait_event(lambda e: e.get("type") == "tool_execution_start", START_S, "the tool call")
    text = marker("KILLED-DOOR-PI")
    rig.send(text)
    pi.wait_event(holding(1), SEEN_S, "the batch steered into the running turn")
    # The door printed the batch and pi holds it, but no model request has carried it yet: the
    # cursor has not moved. The door dies here; the extension starts another.
    os.kill(door, signal.SIGKILL)
    wait_for(lambda: [p for p in pi.doors() if p != door], 30, "the door started again")
    rig.release_tool()
    rig.model.wait_for(text, SEEN_S)
    wait_for(rig.receipt, 30, "the delivered receipt")
    after = marker("AFTER-KILL-PI")  # the new door delivers, and the old batch does not come again
    rig.send(after)
    rig.model.wait_for(after, SEEN_S)
    wait_for(rig.receipt, 30, "the second receipt")
    framed_once(rig, text)
    framed_once(rig, after)


@pytest.mark.hosts
def test_an_idle_interactive_pi_is_woken_and_shows_the_mail_as_talk_s(rig: PiRig) -> None:
    tmux = rig.start_tui()
    rig.session()
    text = marker("TUI-PI")
    rig.send(text)
    rig.model.wait_for(text, SEEN_S)
    wait_for(lambda: "FAKE_OK" in tmux.screen() and BUSY not in tmux.screen(), 60,
             "the woken turn's answer on pi's screen")
    assert "from alice (fingerprint" in tmux.screen()  # shown as talk's message, framed
    wait_for(rig.receipt, 30, "the delivered receipt")
    framed_once(rig, text)


@pytest.mark.hosts
def test_pi_connects_to_the_mcp_server_talk_install_added(rig: PiRig) -> None:
    env = pi_setup(rig.home, rig.model.url)
    rig.project.mkdir(parents=True, exist_ok=True)
    done = rig.group.run([*pi_program(rig.bin_dir), "mcp", "list"], cwd=rig.project, env=env, timeout=120)
    assert "talk: connected" in done.stdout and "send_message" in done.stdout, done.stdout + done.stderr


@pytest.mark.hosts
def test_kill_9_of_pi_holding_a_batch_loses_nothing_the_next_session_gets_it_once(rig: PiRig) -> None:
    pi = rig.start_pi()
    first_sid = rig.session()
    pi.prompt("RUN_TOOL and wait")
    pi.wait_event(lambda e: e.get("type") == "tool_execution_start", START_S, "the tool call")
    text = marker("KILLED-PI")
    rig.send(text)
    pi.wait_event(holding(1), SEEN_S, "the batch steered into the running turn")
    os.kill(pi.pid, signal.SIGKILL)  # pi held the batch, no model request had carried it
    assert pi.proc is not None
    pi.proc.wait(30)
    assert rig.model.count(text) == 0
    rig.bob.ok("gc")  # the ended session's unread mail goes back to the inbox
    rig.release_tool()
    second = rig.start_pi()
    assert rig.session() != first_sid
    rig.model.wait_for(text, SEEN_S)
    wait_for(rig.receipt, 30, "the delivered receipt")
    framed_once(rig, text)
    assert second.doors()
