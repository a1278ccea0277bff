"""The Gemini CLI alarm on the real program: `talk install gemini`, then real `gemini` runs.

Each test drives the pinned Gemini CLI (from npm) against the fake model's Gemini API on
loopback, with a real relay and bob's follower, and `talk install gemini` writing the hooks into
Gemini CLI's own settings.json. A test passes when the fake model receives alice's text, once:
at the start of a turn, after a tool call, or in the one more turn AfterAgent asks for.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from alarms.mailbox import SessionMail
from tests.conftest import TALK, wait_for
from tests.hosts.gemini import gemini_env, prompt_argv, write_gemini_settings
from tests.hosts.peer_mail import older_than_the_margin
from tests.hosts.roles import MAIL, arrives_as_claimed

HELD_HOOK = Path(__file__).resolve().parent / "held_hook.py"
LONG_WORDS = 7_600  # a 60 KB text: longer than what Gemini CLI keeps of a tool's result


def spool_has(folder: Path, msg_id: str, name: str | None = None) -> bool:
    root = folder / "spool"
    files = [root / name] if name else [*root.glob("inbox.ndjson*"), *root.glob("sessions/*.ndjson*")]
    return any(p.exists() and msg_id in p.read_text() for p in files)


def gemini_session(agent: Any) -> dict[str, Any] | None:
    live = [s for s in agent.ok("session", "list", "--json").json() if s["host"] == "gemini" and s["alive"]]
    assert len(live) <= 1, live
    return live[0] if live else None


def talk_install(setup: dict[str, Any], *args: str) -> dict[str, Any]:
    import subprocess

    r = subprocess.run([TALK, *args, "gemini", "--settings", str(setup["settings"]), "--json"],
                       env=setup["env"], cwd=setup["project"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    out: dict[str, Any] = json.loads(r.stdout)
    return out


def receipt(agent: Any, msg_id: str) -> str:
    agent.ok("receive")
    state: str = agent.ok("status", msg_id, "--json").json()["state"]
    return state


@pytest.fixture
def gemini_setup(pair: Any, host_bin: Path, host_home: Path, tmp_path: Path) -> Iterator[dict[str, Any]]:
    """bob's follower, a throwaway HOME whose Gemini CLI settings point at no real service, and
    an env for `gemini` (the fake model's URL is added per test)."""
    from tests.hosts.npm import host_env

    alice, bob = pair
    bob.ok("follow", "--peer", "alice")
    project = tmp_path / "project"
    project.mkdir()
    settings = write_gemini_settings(host_home)
    env = host_env(host_home, TALK_HOME=str(bob.home))
    try:
        yield {"alice": alice, "bob": bob, "project": project, "env": env, "settings": settings,
               "gemini": host_bin / "gemini", "folder": bob.home / "bob"}
    finally:
        bob.run("stop")


def install_into(setup: dict[str, Any], model_url: str) -> dict[str, Any]:
    setup["env"].update(gemini_env(model_url))
    return talk_install(setup, "install")


def run_gemini(setup: dict[str, Any], procs: Any, prompt: str, *more: str) -> None:
    r = procs.run([*prompt_argv(setup["gemini"], prompt), *more], cwd=setup["project"], env=setup["env"],
                  timeout=180)
    assert r.returncode == 0, r.stdout + r.stderr


def start_gemini(setup: dict[str, Any], procs: Any, prompt: str, log: Path) -> Any:
    return procs.start(prompt_argv(setup["gemini"], prompt), cwd=setup["project"], env=setup["env"],
                       stdout=log, stderr=log)


def session_sid(setup: dict[str, Any]) -> str:
    found = wait_for(lambda: gemini_session(setup["bob"]), 60, "the Gemini CLI session's registration")
    return str(found["sid"])


# --- install ------------------------------------------------------------------------------------


@pytest.mark.hosts
def test_install_merges_and_uninstall_puts_settings_back(gemini_setup: dict[str, Any]) -> None:
    s = gemini_setup
    before = json.loads(s["settings"].read_text())
    first = install_into(s, "http://127.0.0.1:9")
    assert first["changed"] and first["settings_file"] == str(s["settings"])
    doc = json.loads(s["settings"].read_text())
    assert {k: doc[k] for k in before} == before  # the rest is untouched
    assert sorted(doc["hooks"]) == sorted(first["events"])
    assert doc["mcpServers"]["talk"]["args"][:3] == ["mcp", "--host", "gemini"]
    assert not install_into(s, "http://127.0.0.1:9")["changed"]  # twice changes nothing
    removed = talk_install(s, "uninstall")
    assert removed["changed"] and json.loads(s["settings"].read_text()) == before
    assert not talk_install(s, "uninstall")["changed"]


# --- mail through the hooks ------------------------------------------------------------------------


@pytest.mark.hosts
def test_mail_waiting_at_start_reaches_the_model_once(
    gemini_setup: dict[str, Any], fake_model: Any, host_procs: Any,
) -> None:
    s = gemini_setup
    text = f"PEER-BEFORE-START: the build is green\n{MAIL}"
    msg_id = s["alice"].ok("send", "bob", text, "--json").json()["id"]
    wait_for(lambda: spool_has(s["folder"], msg_id, "inbox.ndjson"), 15, "the follower to spool the mail")
    install_into(s, fake_model.url)
    run_gemini(s, host_procs, "hello gemini")
    first = fake_model.wait_for(msg_id, timeout=10)
    assert "hello gemini" in first["last_user_text"]
    assert first["last_user_text"].count("PEER-BEFORE-START") == 1
    assert fake_model.count("PEER-BEFORE-START") == 1, fake_model.summary()
    arrives_as_claimed(first, "PEER-BEFORE-START", "Gemini CLI", "BeforeAgent")
    offered = json.dumps(first["body"].get("tools"))
    assert "check_inbox" in offered and "send_message" in offered  # talk's MCP server, started by Gemini CLI
    assert not spool_has(s["folder"], msg_id, "inbox.ndjson")  # the session took the inbox over
    wait_for(lambda: receipt(s["alice"], msg_id) == "delivered", 15, "the delivered receipt")


@pytest.mark.hosts
def test_mail_mid_turn_reaches_the_model_after_a_tool_call_once(
    gemini_setup: dict[str, Any], host_procs: Any, tmp_path: Path,
) -> None:
    from tests.hosts.fake_model import FakeModel

    s = gemini_setup
    gate = tmp_path / "gate"
    with FakeModel(tool_command=f"while [ ! -e {gate} ]; do sleep 0.05; done; echo TOOL-DONE") as model:
        install_into(s, model.url)
        proc = start_gemini(s, host_procs, "work on it RUN_TOOL", tmp_path / "gemini.log")
        sid = session_sid(s)
        model.wait_for("RUN_TOOL", timeout=60)
        msg_id = s["alice"].ok("send", "bob", f"PEER-MID-TURN: please rebase\n{MAIL}", "--json").json()["id"]
        wait_for(lambda: spool_has(s["folder"], msg_id, f"sessions/{sid}.ndjson"), 15, "the session's spool")
        gate.touch()
        assert proc.wait(timeout=120) == 0, (tmp_path / "gemini.log").read_text()
        requests = model.requests
        assert len(requests) == 2, model.summary()  # the tool's turn went on; no extra turn after it
        assert "TOOL-DONE" in requests[1]["trailing_text"] and msg_id in requests[1]["trailing_text"]
        assert model.count_new("PEER-MID-TURN") == 1
        arrives_as_claimed(requests[1], "PEER-MID-TURN", "Gemini CLI", "AfterTool")
        assert "PEER-MID-TURN" not in json.dumps(requests[0]["body"])
        assert SessionMail(s["folder"], sid).waiting() == 0
        wait_for(lambda: receipt(s["alice"], msg_id) == "delivered", 15, "the delivered receipt")


@pytest.mark.hosts
def test_mail_at_the_end_of_a_turn_makes_after_agent_run_one_more_turn(
    gemini_setup: dict[str, Any], host_procs: Any, tmp_path: Path,
) -> None:
    from tests.hosts.fake_model import FakeModel

    s = gemini_setup
    with FakeModel(slow_delay=0.6) as model:
        install_into(s, model.url)
        proc = start_gemini(s, host_procs, "work on it SLOW_REPLY", tmp_path / "gemini.log")
        sid = session_sid(s)
        model.wait_for("SLOW_REPLY", timeout=60)
        text = f"PEER-END-OF-TURN: please rebase\n{MAIL}"
        msg_id = s["alice"].ok("send", "bob", text, "--json").json()["id"]
        wait_for(lambda: spool_has(s["folder"], msg_id, f"sessions/{sid}.ndjson"), 15, "the session's spool")
        assert proc.wait(timeout=120) == 0, (tmp_path / "gemini.log").read_text()
        requests = model.requests
        assert len(requests) == 2, model.summary()  # one more turn, then AfterAgent let it end
        assert msg_id in requests[1]["last_user_text"] and model.count("PEER-END-OF-TURN") == 1
        assert "PEER-END-OF-TURN" not in json.dumps(requests[0]["body"])
        arrives_as_claimed(requests[1], "PEER-END-OF-TURN", "Gemini CLI", "AfterAgent")
        wait_for(lambda: receipt(s["alice"], msg_id) == "delivered", 15, "the delivered receipt")


def long_text(tag: str) -> str:
    return " ".join([f"{tag}-BEGIN", *(f"w{i:05d}x" for i in range(LONG_WORDS)), f"{tag}-END"])


@pytest.mark.hosts
def test_a_long_message_mid_turn_waits_for_after_agent_and_arrives_whole(
    gemini_setup: dict[str, Any], host_procs: Any, tmp_path: Path,
) -> None:
    """60 KB would be cut inside a tool's result (Gemini CLI keeps its first 8,000 and last
    32,000 characters), so AfterTool leaves it, and AfterAgent's new prompt carries it whole."""
    from tests.hosts.fake_model import FakeModel

    s = gemini_setup
    gate = tmp_path / "gate"
    text = long_text("PEER-LONG")
    assert len(text) > 60_000
    with FakeModel(tool_command=f"while [ ! -e {gate} ]; do sleep 0.05; done; echo TOOL-DONE") as model:
        install_into(s, model.url)
        proc = start_gemini(s, host_procs, "work on it RUN_TOOL", tmp_path / "gemini.log")
        sid = session_sid(s)
        model.wait_for("RUN_TOOL", timeout=60)
        msg_id = s["alice"].ok("send", "bob", text, "--json").json()["id"]
        wait_for(lambda: spool_has(s["folder"], msg_id, f"sessions/{sid}.ndjson"), 15, "the session's spool")
        gate.touch()
        assert proc.wait(timeout=120) == 0, (tmp_path / "gemini.log").read_text()
        requests = model.requests
        assert len(requests) == 3, model.summary()  # the tool's turn, then one more for the mail
        assert "PEER-LONG" not in requests[1]["trailing_text"]
        assert text in requests[2]["last_user_text"] and model.count("PEER-LONG-BEGIN") == 1
        wait_for(lambda: receipt(s["alice"], msg_id) == "delivered", 15, "the delivered receipt")


# --- a hook killed in the middle ----------------------------------------------------------------------


def install_held(setup: dict[str, Any], model_url: str, hold: Path) -> None:
    """`install_into`, then the same hook run through tests/hosts/held_hook.py: it holds once it
    has taken mail (its pid in `hold`), to be killed there. `install_into` puts it back."""
    command = install_into(setup, model_url)["command"]
    python, *flags_and_args = shlex.split(command)
    assert flags_and_args[:2] == ["-I", "-S"] and flags_and_args[2].endswith("gemini_hook.py"), flags_and_args
    held = shlex.join([python, "-I", "-S", str(HELD_HOOK), str(hold), *flags_and_args[2:]])
    doc = json.loads(setup["settings"].read_text())
    for groups in doc["hooks"].values():
        for group in groups:
            for hook in group["hooks"]:
                if hook.get("command") == command:
                    hook["command"] = held
    setup["settings"].write_text(json.dumps(doc, indent=2) + "\n")


@pytest.mark.hosts
def test_after_agent_hook_killed_after_taking_mail_hands_it_on_next_run_exactly_once(
    gemini_setup: dict[str, Any], host_procs: Any, tmp_path: Path,
) -> None:
    """SIGKILL between the cursor's move and Gemini CLI reading the AfterAgent hook's answer: the
    next run of the session (a resume) finds the batch missing from the transcript and hands it
    on, once; the run after that does not hand it on again."""
    from alarms.handover import pending_file
    from tests.hosts.fake_model import FakeModel
    from tests.hosts.procs import descendants

    s = gemini_setup
    hold = tmp_path / "held-hook.pid"
    with FakeModel(slow_delay=0.6) as model:
        install_held(s, model.url, hold)
        log = tmp_path / "gemini.log"
        proc = start_gemini(s, host_procs, "work on it SLOW_REPLY", log)
        sid = session_sid(s)
        model.wait_for("SLOW_REPLY", timeout=60)
        msg_id = s["alice"].ok("send", "bob", "PEER-KILLED-HOOK: rebase again", "--json").json()["id"]
        pending = Path(pending_file(str(s["folder"] / "spool" / "sessions"), sid))
        wait_for(hold.exists, 60, "the AfterAgent hook to take the mail")
        assert pending.exists() and SessionMail(s["folder"], sid).waiting() == 0
        older_than_the_margin(pending)  # what Gemini CLI writes after the kill is later
        hook = int(hold.read_text())
        assert hook in descendants(proc.pid)
        os.kill(hook, signal.SIGKILL)
        proc.wait(timeout=120)
        assert not model.find(msg_id), model.summary()
        install_into(s, model.url)  # talk's own hook for the next runs
        run_gemini(s, host_procs, "carry on", "--resume", "latest")
        carried = [sum(t.count(msg_id) for t in r["texts"]) for r in model.requests]
        assert any(carried), model.summary()
        first = next(i for i, c in enumerate(carried) if c)
        assert carried[first:] == [1] * (len(carried) - first), (carried, model.summary())
        assert model.count("PEER-KILLED-HOOK") == 1
        assert not pending.exists()  # a later hook run saw it in the transcript and forgot it
        run_gemini(s, host_procs, "anything else", "--resume", "latest")
        last = model.requests[-1]
        assert sum(t.count(msg_id) for t in last["texts"]) == 1  # in the history, not added again


# --- the interactive program ---------------------------------------------------------------------------


@pytest.mark.hosts
def test_interactive_session_gets_mail_from_while_it_was_idle_with_the_next_prompt_once(
    gemini_setup: dict[str, Any], fake_model: Any,
) -> None:
    """Gemini CLI in a terminal: nothing wakes it while it waits for its user, so mail that came
    meanwhile goes with the next prompt, once, and not again with the one after."""
    from tests.hosts.tmux import Tmux

    s = gemini_setup
    install_into(s, fake_model.url)
    tmux = Tmux({**s["env"], "TERM": "xterm-256color"}, "gemini")
    try:
        tmux.start_shown(s["project"], [str(s["gemini"]), "--yolo"], "Type your message",
                         "Gemini CLI's prompt")
        tmux.submit("hello, a first turn", lambda: fake_model.first_seen("a first turn"))
        sid = session_sid(s)
        msg_id = s["alice"].ok("send", "bob", "PEER-WHILE-IDLE: are you there?", "--json").json()["id"]
        wait_for(lambda: spool_has(s["folder"], msg_id, f"sessions/{sid}.ndjson"), 15, "the session's spool")
        wait_for(lambda: "esc to cancel" not in tmux.screen(), 60, "the first turn to end")
        tmux.submit("anything new", lambda: fake_model.first_seen("anything new"))
        seen = fake_model.wait_for(msg_id, timeout=60)
        assert "anything new" in seen["last_user_text"] and fake_model.count("PEER-WHILE-IDLE") == 1
        tmux.submit("and now", lambda: fake_model.first_seen("and now"))
        assert fake_model.count("PEER-WHILE-IDLE") == 1, fake_model.summary()
        wait_for(lambda: receipt(s["alice"], msg_id) == "delivered", 15, "the delivered receipt")
    finally:
        tmux.kill()
