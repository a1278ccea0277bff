"""`talk run copilot`: the real Copilot CLI (pinned in tests/hosts/package.json) in its TUI+server
mode, with talk's door on its JSON-RPC port, against the fake model.

The project folder is trusted in Copilot's config beforehand, so nobody touches the terminal
between the start and the mail: a just-started session takes mail waiting for it and mail that
arrives while it is idle, each as a turn of its own, once, with the hooks installed beside the
door (one cursor); mail that arrives in a turn is left to the hooks (after the tool call) or,
without them, waits for the turn's end, so the running command is never moved to the
background. The port has no authentication: without --allow-local-port the command refuses,
and the port answers a client that offers no token.
"""

from __future__ import annotations

import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from alarms.hosts.copilot.rpc import Connection
from tests.conftest import TALK, Agent, wait_for
from tests.hosts.copilot import (
    TOOL_DONE,
    Rig,
    delivered,
    door_session,
    gated_model,
    in_session_spool,
    install,
    live_session,
    roles,
    trusted_rig,
)
from tests.hosts.fake_model import FakeModel
from tests.hosts.peer_mail import Receipt, bob_layout, copies_steady, handed_states, outbox_state, send
from tests.hosts.procs import descendants
from tests.hosts.roles import MAIL, arrives_as_claimed
from tests.hosts.tmux import Tmux

PROMPT = "/ commands"  # on Copilot's screen once its input is ready


@pytest.fixture
def run_rig(pair: tuple[Agent, Agent], host_bin: Path, host_home: Path, tmp_path: Path) -> Iterator[Rig]:
    """bob following alice, `copilot` on PATH, and the project trusted in Copilot's own config."""
    with trusted_rig(pair, host_bin, host_home, tmp_path) as rig:
        yield rig


def launch(r: Rig, model: FakeModel, *args: str) -> Tmux:
    tmux = Tmux({**r.env_for(model), "TERM": "xterm-256color"}, "copilot-run")
    tmux.start_shown(r.project, [TALK, "run", "copilot", *args], PROMPT, "Copilot's prompt under talk run")
    return tmux





def port_of(tmux: Tmux) -> int:
    """The port `talk run` gave Copilot, from Copilot's command line under the tmux pane."""
    pane = tmux.pane_pid()
    assert pane is not None
    for pid in descendants(pane):
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")
        except OSError:
            continue
        if "--ui-server" in argv and "--port" in argv:
            return int(argv[argv.index("--port") + 1])
    raise AssertionError("no `copilot --ui-server --port N` under the pane")


@pytest.mark.hosts
def test_refused_without_allow_local_port(run_rig: Rig, fake_model: FakeModel) -> None:
    done = subprocess.run([TALK, "run", "copilot"], env=run_rig.env_for(fake_model), cwd=run_rig.project,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "--allow-local-port" in done.stderr and "no authentication" in done.stderr, done.stderr
    assert live_session(run_rig.bob) is None


@pytest.mark.hosts
def test_a_just_started_session_takes_mail_waiting_and_mail_arriving_idle_each_once(
    run_rig: Rig, fake_model: FakeModel,
) -> None:
    r = run_rig
    waiting, idle = (f"PEER-RUN-{what}-{uuid.uuid4().hex[:8]}" for what in ("WAITING", "IDLE"))
    first_id = send(r.alice, f"{waiting}: the build is green")
    install(r.env, r.project)  # the hooks beside the door: one cursor, so still once
    tmux = launch(r, fake_model, "--allow-local-port", "--yolo")
    try:
        sid = door_session(r)
        seen = fake_model.wait_for(waiting, timeout=90)
        assert first_id in seen["last_user_text"], fake_model.summary()
        assert roles(seen, waiting) == ["user"], seen["body"].get("messages")
        tmux.wait_shown(f"FAKE_OK [req {seen['n']}]", 60, "the end of that turn: the session is idle")
        second_id = send(r.alice, f"{idle}: are you there?\n{MAIL}")
        later = fake_model.wait_for(idle, timeout=90)
        assert roles(later, idle) == ["user"] and second_id in later["last_user_text"], fake_model.summary()
        arrives_as_claimed(later, idle, "`talk run copilot`", "enqueue", f"{idle}: are you there?\n{MAIL}")
        assert fake_model.count(waiting) == 1 and fake_model.count(idle) == 1, fake_model.summary()
        assert copies_steady(fake_model, waiting) and copies_steady(fake_model, idle), fake_model.summary()
        wait_for(lambda: delivered(r, first_id) and delivered(r, second_id), 30,
                 "the door's `delivered`, from Copilot's event log")
        for msg_id in (first_id, second_id):
            assert handed_states(bob_layout(r.bob), msg_id) == [Receipt.WRITTEN, Receipt.DELIVERED]
        wait_for(lambda: outbox_state(r.alice, second_id) == "delivered", 60, "alice's `delivered` receipt")
        with Connection.open(port_of(tmux)) as conn:  # nobody asked for a token, nor can
            assert conn.call("session.getForeground", {})["sessionId"] == sid
    finally:
        tmux.kill()


@pytest.mark.hosts
def test_mail_in_a_turn_is_left_to_the_hooks_and_reaches_the_model_after_the_tool_once(
    run_rig: Rig, tmp_path: Path,
) -> None:
    """Sent into a running turn, a prompt would move the running command to the background: the
    door leaves mid-turn mail to the postToolUse hook, which hands it on with the tool's result."""
    r, gate = run_rig, tmp_path / "gate"
    needle = f"PEER-RUN-MID-{uuid.uuid4().hex[:8]}"
    with gated_model(gate) as model:
        install(r.env, r.project)
        tmux = launch(r, model, "--allow-local-port", "--yolo")
        try:
            sid = door_session(r)
            tmux.type("work on it RUN_TOOL")
            model.wait_for("RUN_TOOL", timeout=90)
            msg_id = send(r.alice, f"{needle}: please rebase")
            wait_for(lambda: in_session_spool(r, sid, needle), 30, "the session's spool")
            assert model.first_seen(needle) is None and len(model.requests) == 1  # held while the tool runs
            gate.touch()
            seen = model.wait_for(needle, timeout=90)
            assert seen["n"] == 2 and TOOL_DONE in seen["trailing_text"], model.summary()  # the next request
            assert roles(seen, needle) == ["tool"], seen["body"].get("messages")  # with the tool's result
            assert model.count_new(needle) == 1 and copies_steady(model, needle), model.summary()
            wait_for(lambda: delivered(r, msg_id), 30, "`delivered`, from Copilot's event log")
            assert handed_states(bob_layout(r.bob), msg_id) == [Receipt.DELIVERED]  # the hook's, alone
        finally:
            tmux.kill()


@pytest.mark.hosts
def test_without_hooks_mail_in_a_turn_waits_for_its_end_past_a_permission_question(
    run_rig: Rig, tmp_path: Path,
) -> None:
    """No hooks, no --yolo: Copilot asks before running the command. Mail sent then would wait
    under the question and, once the user allowed the command, move it to the background: the
    door holds it until the turn is over, then starts a turn of its own."""
    r, gate = run_rig, tmp_path / "gate"
    needle = f"PEER-RUN-ASKING-{uuid.uuid4().hex[:8]}"
    with gated_model(gate) as model:
        tmux = launch(r, model, "--allow-local-port")
        try:
            sid = door_session(r)
            tmux.type("work on it RUN_TOOL")
            tmux.wait_shown("Do you want to run this command?", 90, "Copilot's permission question")
            msg_id = send(r.alice, f"{needle}: one more thing")
            wait_for(lambda: in_session_spool(r, sid, needle), 30, "the session's spool")
            screen = tmux.screen()
            assert "Do you want to run this command?" in screen and needle not in screen
            assert len(model.requests) == 1
            tmux.keys("Enter")  # 1. Yes
            gate.touch()
            seen = model.wait_for(needle, timeout=90)
            # It ran in the foreground: mail waiting under the question would have moved it away.
            assert TOOL_DONE in model.requests[1]["trailing_text"], model.summary()
            assert seen["n"] == 3 and needle in seen["last_user_text"], model.summary()  # a turn of its own
            assert roles(seen, needle) == ["user"] and model.count(needle) == 1, model.summary()
            wait_for(lambda: delivered(r, msg_id), 30, "the door's `delivered`, from Copilot's event log")
        finally:
            tmux.kill()


@pytest.mark.hosts
def test_after_clear_the_door_follows_the_new_session_and_retires_the_old(
    run_rig: Rig, fake_model: FakeModel,
) -> None:
    r = run_rig
    needle = f"PEER-RUN-CLEARED-{uuid.uuid4().hex[:8]}"
    tmux = launch(r, fake_model, "--allow-local-port", "--yolo")
    try:
        first = door_session(r)
        tmux.type("/clear")
        second = wait_for(lambda: (s := live_session(r.bob)) and s["sid"] != first and s["sid"], 60,
                          "the door to register the new session, and only it")
        msg_id = send(r.alice, f"{needle}: after the clear")
        seen = fake_model.wait_for(needle, timeout=90)
        assert roles(seen, needle) == ["user"] and fake_model.count(needle) == 1, fake_model.summary()
        assert in_session_spool(r, second, needle) and not in_session_spool(r, first, needle)
        wait_for(lambda: delivered(r, msg_id), 30, "the door's `delivered`, from Copilot's event log")
    finally:
        tmux.kill()
