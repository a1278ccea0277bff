"""`talk run codex`: the real Codex TUI on talk's private app-server, with the door as a second
client, in tmux against the fake model; a real relay and bob's follower bring alice's mail.

What is checked on the model's side: the framed text is new in exactly one request of the thread
(the fake model's `count`) and carried as history after, always in a user-role message and never
in a developer one (talk's hooks are installed too, and stand down while the door lives).
"""

from __future__ import annotations

import functools
import json
import os
import signal
import stat
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from alarms.hosts.codex.turns import TurnLog
from alarms.mailbox import SessionMail
from tests.conftest import TALK, wait_for
from tests.hosts import wire
from tests.hosts.codex import EXTRA_CONFIG, argv_of, assert_once, thread_requests, wait_idle
from tests.hosts.roles import MAIL, arrives_as_claimed
from tests.hosts.talk_install import install_codex
from tests.hosts.tmux import Tmux

pytestmark = pytest.mark.hosts


def user_texts(request: dict[str, Any]) -> str:
    return "\n".join(wire.role_texts(request["path"], request["body"], "user"))


def developer_texts(request: dict[str, Any]) -> str:
    body = request["body"]
    developer = wire.role_texts(request["path"], body, "developer")
    return "\n".join(developer + wire.strings(body.get("instructions")))


def new_in(requests: list[dict[str, Any]], msg_id: str) -> int:
    """In how many of the thread's requests the message is new input (Codex's title request, a
    thread of its own, repeats the first turn's input and is not counted)."""
    return sum(msg_id in r["last_user_text"] for r in requests)


def as_user(msg_id: str) -> Callable[[dict[str, Any]], bool]:
    return lambda r: f"id {msg_id}" in user_texts(r)


@pytest.fixture
def run_setup(pair: Any, host_bin: Path, host_home: Path, tmp_path: Path) -> Iterator[dict[str, Any]]:
    """bob's follower, a throwaway CODEX_HOME on the fake model, talk's hooks installed and trusted;
    `start(model_url)` opens `talk run codex` in tmux and waits for the TUI."""
    from tests.hosts.configs import codex_env, write_codex_config
    from tests.hosts.npm import host_env

    alice, bob = pair
    bob.ok("follow", "--peer", "alice")
    codex_home, project = host_home / ".codex", tmp_path / "project"
    project.mkdir()
    env = host_env(host_home, **codex_env(codex_home), TALK_HOME=str(bob.home), TERM="xterm-256color",
                   TALK_CODEX_BIN=str(host_bin / "codex"))
    tmuxes: list[Tmux] = []

    def start(model_url: str, *args: str, policy: str = EXTRA_CONFIG) -> Tmux:
        config = write_codex_config(codex_home, model_url)
        config.write_text(policy + config.read_text())
        r = install_codex(["--codex-home", str(codex_home), "--codex-bin", str(host_bin / "codex"), "--json"],
                          env, project)
        assert r.returncode == 0, r.stderr
        tmux = Tmux(env, "codexrun")
        tmuxes.append(tmux)
        tmux.start(project, [TALK, "run", "codex", *args])
        tmux.wait_shown("for shortcuts", what="the Codex TUI under talk run")
        return tmux

    try:
        yield {"alice": alice, "bob": bob, "folder": bob.home / "bob", "home": host_home, "start": start}
    finally:
        for tmux in tmuxes:
            tmux.kill()
        bob.run("stop")


def live_session(setup: dict[str, Any]) -> dict[str, Any]:
    def live() -> list[dict[str, Any]]:
        sessions = setup["bob"].ok("session", "list", "--json").json()
        return [s for s in sessions if s["host"] == "codex" and s["alive"]]

    wait_for(lambda: bool(live()), 60, "a live Codex session")
    (session,) = live()
    return session


def rollout_of(setup: dict[str, Any], sid: str) -> TurnLog:
    sessions = setup["home"] / ".codex" / "sessions"
    found = wait_for(lambda: list(sessions.rglob(f"rollout-*{sid}.jsonl")), 30, "the thread's rollout")
    return TurnLog(str(found[0]))


def app_server_socket(home: Path) -> tuple[int, Path]:
    """talk's app-server for the TUI (HOME=home) and the socket path it was given."""
    from tests.hosts.procs import pids_with_home

    for pid in pids_with_home(home):
        argv = [a for a in argv_of(pid) if a]
        if argv and os.path.basename(argv[0]) == "codex" and "app-server" in argv and "--listen" in argv:
            return pid, Path(argv[argv.index("--listen") + 1].removeprefix("unix://"))
    raise AssertionError("no app-server started by talk run")


def in_inbox(folder: Path, msg_id: str) -> bool:
    """Whether the message waits in the identity's inbox (a file the spool rewrites as it goes)."""
    try:
        return msg_id in (folder / "spool" / "inbox.ndjson").read_text()
    except FileNotFoundError:
        return False


def delivered(folder: Path, msg_id: str) -> bool:
    """Whether the door recorded the message's `delivered` receipt (the rollout showed it)."""
    handed = folder / "spool" / "handed.ndjson"
    lines = handed.read_text().splitlines() if handed.exists() else []
    return any(msg_id in line and "delivered" in line for line in lines)


def test_a_just_started_tui_gets_mail_without_a_keystroke_once_as_user_input(
    run_setup: dict[str, Any], fake_model: Any,
) -> None:
    s = run_setup
    early = s["alice"].ok("send", "bob", "PEER-EARLY: are you up?", "--json").json()["id"]
    wait_for(lambda: in_inbox(s["folder"], early), 30, "the mail in bob's inbox")
    started = time.time()
    tmux = s["start"](fake_model.url)
    first = fake_model.wait_until(as_user(early), 90, "the early mail as the TUI's first turn")
    sid = first["headers"].get("session-id")
    assert live_session(s)["sid"] == sid
    rollout = rollout_of(s, sid)
    wait_idle(rollout, 1)
    print(f"first turn: talk run -> model request {first['ts'] - started:.2f} s")

    sent = time.time()
    idle_text = f"PEER-IDLE: still there?\n{MAIL}"  # what a host might rewrite: quotes, > & <, non-ASCII
    later = s["alice"].ok("send", "bob", idle_text, "--json").json()["id"]
    woken = fake_model.wait_until(as_user(later), 60, "the idle mail")
    arrives_as_claimed(woken, "PEER-IDLE", "`talk run codex`", "turn/start", idle_text)
    wait_idle(rollout, 2)
    print(f"idle: send -> model request {woken['ts'] - sent:.2f} s")

    requests = thread_requests(fake_model, sid)
    for msg_id in (early, later):
        assert new_in(requests, msg_id) == 1, fake_model.summary()
        assert_once(requests, msg_id)
        assert all(msg_id not in developer_texts(r) for r in requests)  # the hooks stood down
        wait_for(functools.partial(delivered, s["folder"], msg_id), 30, "the delivered receipt")
    assert "PEER-IDLE" in woken["last_user_text"]  # the turn's own input: the framed mail
    assert "PEER-EARLY" in tmux.screen() or "PEER-IDLE" in tmux.screen()  # the TUI shows the turn
    assert SessionMail(s["folder"], sid).waiting() == 0

    # Privacy: the socket's folder is the user's alone, and so is the socket Codex links there.
    server, sock = app_server_socket(s["home"])
    assert stat.S_IMODE(sock.parent.stat().st_mode) == 0o700 and sock.parent.stat().st_uid == os.getuid()
    real = Path(os.path.realpath(sock))
    assert stat.S_ISSOCK(real.stat().st_mode) and real.stat().st_uid == os.getuid()
    assert stat.S_IMODE(real.stat().st_mode) & 0o077 == 0
    assert stat.S_IMODE(real.parent.stat().st_mode) & 0o077 == 0

    # Quitting ends all of it: the TUI, talk's app-server, the folder and the session.
    talk_run = tmux.pane_pid()
    assert talk_run is not None
    tmux.submit("/quit", lambda: tmux.program_gone(talk_run), timeout=60, every=5)
    assert tmux.ended() in (None, "exited with status 0")  # None: tmux has not seen it end yet
    wait_for(lambda: not Path(f"/proc/{server}").exists(), 30, "talk's app-server to stop")
    assert not sock.parent.exists()
    assert not any(x["sid"] == sid for x in s["bob"].ok("session", "list", "--json").json())

    # `talk run codex resume SID`: Codex announces a resumed thread only by its status; it is the
    # session again, and mail that waited meanwhile comes as its next turn.
    again = s["alice"].ok("send", "bob", "PEER-RESUMED: welcome back", "--json").json()["id"]
    wait_for(lambda: in_inbox(s["folder"], again), 30, "the mail in bob's inbox")
    s["start"](fake_model.url, "resume", sid)
    back = fake_model.wait_until(as_user(again), 90, "the mail in the resumed thread")
    assert back["headers"].get("session-id") == sid and live_session(s)["sid"] == sid
    assert new_in(thread_requests(fake_model, sid), again) == 1


def test_mail_mid_turn_is_steered_into_the_running_turn_once(
    run_setup: dict[str, Any], tmp_path: Path,
) -> None:
    from tests.hosts.fake_model import FakeModel

    s = run_setup
    flag = tmp_path / "tool-may-end"
    with FakeModel(tool_command=f"while [ ! -e {flag} ]; do sleep 0.05; done; echo TOOL_DONE") as model:
        tmux = s["start"](model.url)
        sid = live_session(s)["sid"]
        tmux.submit("work on it RUN_TOOL", lambda: model.first_seen("RUN_TOOL"))
        msg_id = s["alice"].ok("send", "bob", "PEER-MID-TURN: please rebase", "--json").json()["id"]
        mail = SessionMail(s["folder"], sid)
        spool = s["folder"] / "spool" / "sessions" / f"{sid}.ndjson"
        wait_for(lambda: spool.exists() and msg_id in spool.read_text(), 30, "the session's spool")
        wait_for(lambda: mail.waiting() == 0, 30, "the door to give the mail to the running turn")
        assert not model.find(msg_id)  # the tool still runs: the steer waits for its end
        ended = time.time()
        flag.touch()
        after = model.wait_until(as_user(msg_id), 60, "the mail after the tool call")
        wait_idle(rollout_of(s, sid), 1)  # the one turn, steered
        requests = thread_requests(model, sid)
        # The terminal hangs up: talk ends the TUI and its app-server, and the session ends.
        server, sock = app_server_socket(s["home"])
        talk = tmux.pane_pid()
        assert talk is not None
        os.kill(talk, signal.SIGHUP)
        wait_for(lambda: not Path(f"/proc/{server}").exists() and not sock.parent.exists(), 30,
                 "talk's app-server and folder to go with the hang-up")
        wait_for(lambda: not any(x["sid"] == sid for x in s["bob"].ok("session", "list", "--json").json()),
                 30, "the session to end")
    outputs = [i for i in after["body"]["input"] if i.get("type") == "function_call_output"]
    assert outputs and "TOOL_DONE" in json.dumps(outputs[-1])  # the same turn, after its tool call
    assert sum("RUN_TOOL" in r["last_user_text"] for r in requests) == 1  # no new turn of its own
    assert new_in(requests, msg_id) == 1
    assert_once(requests, msg_id)
    assert all(msg_id not in developer_texts(r) for r in requests)
    assert not any("<hook_prompt" in r["last_user_text"] for r in requests)
    print(f"mid-turn: tool end -> model request {after['ts'] - ended:.2f} s")


ASK_CONFIG = 'approval_policy = "on-request"\nsandbox_mode = "read-only"\n'


def test_mail_waits_while_the_user_is_asked_to_approve_a_command(
    run_setup: dict[str, Any], tmp_path: Path,
) -> None:
    """Codex asks the TUI to approve a command run outside the sandbox: the door gives nothing
    until the user has answered, then steers the mail into the turn."""
    from tests.hosts.fake_model import FakeModel

    s = run_setup
    flag = tmp_path / "tool-may-end"
    door_log = s["folder"] / "codex" / "door.log"
    with FakeModel(tool_command=f"while [ ! -e {flag} ]; do sleep 0.05; done; echo TOOL_DONE",
                   escalate=True) as model:
        tmux = s["start"](model.url, policy=ASK_CONFIG)
        sid = live_session(s)["sid"]
        tmux.submit("work on it RUN_TOOL", lambda: model.first_seen("RUN_TOOL"))
        tmux.wait_shown("Would you like to run the following command?", 60, "the approval question")
        msg_id = s["alice"].ok("send", "bob", "PEER-ASKING: a question meanwhile", "--json").json()["id"]
        wait_for(lambda: door_log.exists() and "mail waits while the user is asked (waitingOnApproval)"
                 in door_log.read_text(), 30, "the door to hold the mail")
        mail = SessionMail(s["folder"], sid)
        assert mail.waiting() == 1 and not model.find(msg_id)
        assert "Would you like to run the following command?" in tmux.screen()  # undisturbed
        tmux.keys("y")
        wait_for(lambda: mail.waiting() == 0, 30, "the door to give the mail once the user answered")
        flag.touch()
        after = model.wait_until(as_user(msg_id), 60, "the mail after the approved tool call")
        wait_idle(rollout_of(s, sid), 1)
        requests = thread_requests(model, sid)
    outputs = [i for i in after["body"]["input"] if i.get("type") == "function_call_output"]
    assert outputs and "TOOL_DONE" in json.dumps(outputs[-1])
    assert new_in(requests, msg_id) == 1
    assert_once(requests, msg_id)
