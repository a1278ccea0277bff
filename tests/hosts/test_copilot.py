"""GitHub Copilot CLI (the real `copilot`, pinned in tests/hosts/package.json) with talk's hooks.

Copilot runs against the fake model through its documented custom-provider settings, offline,
with talk installed by the real `talk install copilot`, a real relay and bob's real follower.
Each test passes when the fake model sees alice's text whole, in the request the hook was for,
and once: mail waiting at start, mail after a tool call in the middle of a turn, mail at the
end of a turn (one more turn), a long message, and a hook killed while handing mail over.
Copilot's extensions are off here, as Copilot CLI 1.0.102 ships: talk's extension is installed
but not loaded, so these are the hooks alone (test_copilot_ext.py turns extensions on; then an
idle session is woken, and in prompt mode the hooks still bring the mail).
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

import pytest

from alarms.handover import pending_file
from alarms.mailbox import SessionMail
from tests.conftest import Agent, wait_for
from tests.hosts.claude import spool_has
from tests.hosts.copilot import (
    TOOL_DONE,
    Rig,
    gated_model,
    in_session_spool,
    install,
    interactive,
    live_session,
    prompt_argv,
    uninstall,
)
from tests.hosts.fake_model import FakeModel
from tests.hosts.npm import host_env
from tests.hosts.peer_mail import (
    Receipt,
    bob_layout,
    copies_steady,
    handed_states,
    long_text,
    older_than_the_margin,
    outbox_state,
    send,
    steady,
    whole_in,
)
from tests.hosts.procs import ProcessGroup, descendants
from tests.hosts.roles import MAIL, arrives_as_claimed
from tests.hosts.tmux import Tmux

HELD_HOOK = Path(__file__).resolve().parent / "held_hook.py"
AFTER_TOOL = "Additional guidance from postToolUse hooks"  # what Copilot puts before the context


@pytest.fixture
def rig(pair: tuple[Agent, Agent], host_bin: Path, host_home: Path, tmp_path: Path) -> Iterator[Rig]:
    alice, bob = pair
    bob.ok("follow", "--peer", "alice")
    project = tmp_path / "project"
    project.mkdir()
    env = host_env(host_home, TALK_HOME=str(bob.home), NO_COLOR="1")
    try:
        yield Rig(alice, bob, host_bin / "copilot", project, host_home, env)
    finally:
        bob.run("stop")


def session_of(r: Rig) -> str:
    session = wait_for(lambda: live_session(r.bob), 60, "the session's registration by sessionStart")
    return str(session["sid"])


class Run(NamedTuple):
    proc: subprocess.Popen[str]
    log: Path
    sid: str
    msg_id: str


def mail_during(r: Rig, procs: ProcessGroup, model: FakeModel, log: Path, prompt: str, marker: str,
                text: str, spooled: str) -> Run:
    """`copilot -p PROMPT` against `model`; once the model saw `marker` (the turn is running),
    alice sends `text`, and this returns when `spooled` is in the session's spool."""
    proc = procs.start(prompt_argv(r.copilot, prompt), cwd=r.project, env=r.env_for(model),
                       stdout=log, stderr=log)
    model.wait_for(marker, timeout=60)
    sid = session_of(r)
    msg_id = send(r.alice, text)
    wait_for(lambda: in_session_spool(r, sid, spooled), 30, "the session's spool")
    return Run(proc, log, sid, msg_id)


@pytest.mark.hosts
def test_install_merges_into_copilots_config_and_uninstall_leaves_the_rest(
    rig: Rig, host_procs: ProcessGroup,
) -> None:
    home = rig.copilot_home()
    (home / "hooks").mkdir(parents=True)
    theirs = {"type": "command", "bash": "echo theirs", "timeoutSec": 5}
    other = {"type": "local", "command": "x", "args": [], "tools": ["*"]}
    (home / "hooks" / "talk.json").write_text(json.dumps({"version": 1, "hooks": {"agentStop": [theirs]}}))
    (home / "mcp-config.json").write_text(json.dumps({"mcpServers": {"other": other}}))
    first = install(rig.env, rig.project)
    hooks = json.loads(Path(first["hooks_file"]).read_text())
    assert hooks["hooks"]["agentStop"][0] == theirs and len(hooks["hooks"]["agentStop"]) == 2
    before = (Path(first["hooks_file"]).read_text(), Path(first["mcp_file"]).read_text())
    install(rig.env, rig.project)
    assert (Path(first["hooks_file"]).read_text(), Path(first["mcp_file"]).read_text()) == before
    listed = host_procs.run([rig.copilot, "mcp", "list"], cwd=rig.project, env=rig.env, timeout=60)
    assert "talk" in listed.stdout and "other" in listed.stdout, listed.stdout + listed.stderr
    assert Path(first["extension_dir"], "extension.mjs").is_file()
    changed = [first["hooks_file"], first["mcp_file"], first["extension_dir"]]
    assert uninstall(rig.env, rig.project)["changed"] == changed
    assert json.loads(Path(first["hooks_file"]).read_text())["hooks"] == {"agentStop": [theirs]}
    assert list(json.loads(Path(first["mcp_file"]).read_text())["mcpServers"]) == ["other"]
    assert uninstall(rig.env, rig.project)["changed"] == []


@pytest.mark.hosts
def test_mail_waiting_at_start_reaches_the_first_request_once(
    rig: Rig, fake_model: FakeModel, host_procs: ProcessGroup,
) -> None:
    needle = f"PEER-AT-START-{uuid.uuid4().hex[:8]}"
    msg_id = send(rig.alice, f"{needle}: the build is green\n{MAIL}")
    wait_for(lambda: spool_has(rig.bob, needle), 30, "the follower to spool the mail")
    install(rig.env, rig.project)
    done = host_procs.run(prompt_argv(rig.copilot, "hello copilot"), cwd=rig.project,
                          env=rig.env_for(fake_model), timeout=180)
    assert done.returncode == 0, done.stderr
    first = fake_model.requests[0]
    assert needle in first["last_user_text"], fake_model.summary()
    assert "hello copilot" in first["last_user_text"]
    assert msg_id in first["last_user_text"] and "grant" in first["last_user_text"]
    assert copies_steady(fake_model, needle), fake_model.summary()
    arrives_as_claimed(first, needle, "Copilot CLI", "userPromptSubmitted")
    tools = [t.get("function", {}).get("name", "") for t in first["body"].get("tools", [])]
    assert any("check_inbox" in name for name in tools), tools  # talk's MCP server, as installed
    assert handed_states(bob_layout(rig.bob), msg_id) == [Receipt.DELIVERED]
    wait_for(lambda: outbox_state(rig.alice, msg_id) == "delivered", 60, "alice's `delivered` receipt")


@pytest.mark.hosts
def test_mail_mid_turn_reaches_the_model_after_the_tool_call_once(
    rig: Rig, host_procs: ProcessGroup, tmp_path: Path,
) -> None:
    gate = tmp_path / "gate"
    needle = f"PEER-MID-TURN-{uuid.uuid4().hex[:8]}"
    with gated_model(gate) as model:
        install(rig.env, rig.project)
        log = tmp_path / "copilot.log"
        proc, _, sid, msg_id = mail_during(rig, host_procs, model, log, "work on it RUN_TOOL", "RUN_TOOL",
                                           f"{needle}: please rebase\n{MAIL}", needle)
        gate.touch()
        assert proc.wait(timeout=180) == 0, log.read_text()
        after_tool = model.requests[1]
        assert TOOL_DONE in after_tool["trailing_text"] and AFTER_TOOL in after_tool["trailing_text"]
        assert needle in after_tool["trailing_text"], model.summary()
        assert msg_id in after_tool["trailing_text"]
        assert copies_steady(model, needle), model.summary()
        assert len(model.requests) == 2  # handed over mid-turn: the stop found nothing more
        arrives_as_claimed(after_tool, needle, "Copilot CLI", "postToolUse")
    assert handed_states(bob_layout(rig.bob), msg_id) == [Receipt.DELIVERED]
    assert SessionMail(rig.bob.home / "bob", sid).waiting() == 0


@pytest.mark.hosts
def test_mail_at_the_end_of_a_turn_makes_one_more_turn(
    rig: Rig, host_procs: ProcessGroup, tmp_path: Path,
) -> None:
    needle = f"PEER-AT-STOP-{uuid.uuid4().hex[:8]}"
    with FakeModel(slow_delay=0.6) as model:
        install(rig.env, rig.project)
        log = tmp_path / "copilot.log"
        proc, _, _, msg_id = mail_during(rig, host_procs, model, log, "think it over SLOW_REPLY",
                                         "SLOW_REPLY", f"{needle}: one more thing\n{MAIL}", needle)
        assert len(model.requests) == 1  # still streaming the only turn
        assert proc.wait(timeout=180) == 0, log.read_text()
        requests = model.requests
        assert len(requests) == 2, model.summary()  # one more turn, then the next stop let it end
        assert needle in requests[1]["last_user_text"] and msg_id in requests[1]["last_user_text"]
        assert model.count(needle) == 1 and steady(model, needle), model.summary()
        arrives_as_claimed(requests[1], needle, "Copilot CLI", "agentStop")
    assert handed_states(bob_layout(rig.bob), msg_id) == [Receipt.DELIVERED]


@pytest.mark.hosts
def test_long_mail_mid_turn_waits_for_the_stop_and_arrives_whole(
    rig: Rig, host_procs: ProcessGroup, tmp_path: Path,
) -> None:
    """60 KB is more than Copilot keeps of a postToolUse context (10,240 characters): the tool's
    hook leaves it, and the stop hands it over whole as the next turn's prompt."""
    gate = tmp_path / "gate"
    needle = f"PEER-LONG-{uuid.uuid4().hex[:8]}"
    text = long_text(needle, 60_000)
    with gated_model(gate) as model:
        install(rig.env, rig.project)
        log = tmp_path / "copilot.log"
        proc, _, _, msg_id = mail_during(rig, host_procs, model, log, "work on it RUN_TOOL", "RUN_TOOL",
                                         text, f"{needle}-END")
        gate.touch()
        assert proc.wait(timeout=180) == 0, log.read_text()
        requests = model.requests
        assert len(requests) == 3, model.summary()  # the tool's result, then the stop's extra turn
        assert needle not in requests[1]["trailing_text"]
        assert whole_in(requests[2], needle, text) and model.count(f"{needle}-END") == 1, model.summary()
        assert steady(model, f"{needle}-END")
    assert handed_states(bob_layout(rig.bob), msg_id) == [Receipt.DELIVERED]
    wait_for(lambda: outbox_state(rig.alice, msg_id) == "delivered", 60, "alice's `delivered` receipt")


@pytest.mark.hosts
def test_idle_interactive_session_is_not_woken_and_gets_the_mail_with_the_next_prompt(
    rig: Rig, fake_model: FakeModel,
) -> None:
    """Nothing from outside starts a turn in an idle Copilot CLI session: the mail waits, and the
    next prompt's hook hands it over, once."""
    needle = f"PEER-IDLE-{uuid.uuid4().hex[:8]}"
    install(rig.env, rig.project)
    tmux = Tmux({**rig.env_for(fake_model), "TERM": "xterm-256color"}, "copilot")
    try:
        interactive(tmux, rig.copilot, rig.project)
        tmux.type("a first turn")
        fake_model.wait_for("a first turn", timeout=60)
        sid = session_of(rig)
        turns = len(fake_model.requests)
        msg_id = send(rig.alice, f"{needle}: are you there?")
        wait_for(lambda: in_session_spool(rig, sid, needle), 30, "the session's spool")
        tmux.type("and now?")
        seen = fake_model.wait_for("and now?", timeout=60)
        assert len(fake_model.requests) == turns + 1  # no turn of its own while idle
        assert needle in seen["last_user_text"] and msg_id in seen["last_user_text"], fake_model.summary()
        assert copies_steady(fake_model, needle), fake_model.summary()
    finally:
        tmux.kill()
    assert handed_states(bob_layout(rig.bob), msg_id) == [Receipt.DELIVERED]


def hold_hooks(hooks_file: Path, hold: Path) -> None:
    """Run talk's installed hook command through tests/hosts/held_hook.py: the same hook, held
    once it has taken mail (its pid in `hold`)."""
    doc = json.loads(hooks_file.read_text())
    for handlers in doc["hooks"].values():
        for h in handlers:
            python, isolated, *rest = shlex.split(h["bash"])
            assert isolated == "-I" and rest[:2] == ["-m", "alarms.hosts.copilot.hook"], h
            h["bash"] = shlex.join([python, "-I", str(HELD_HOOK), str(hold), *rest])
    hooks_file.write_text(json.dumps(doc))


@pytest.mark.hosts
def test_hook_killed_after_taking_mail_hands_it_on_at_the_stop_exactly_once(
    rig: Rig, host_procs: ProcessGroup, tmp_path: Path,
) -> None:
    """SIGKILL between the cursor's move and Copilot reading the postToolUse hook's answer: the
    stop hook finds the batch missing from the session's event log and hands it on, once."""
    gate, hold = tmp_path / "gate", tmp_path / "held-hook.pid"
    needle = f"PEER-KILLED-HOOK-{uuid.uuid4().hex[:8]}"
    with gated_model(gate) as model:
        hold_hooks(Path(install(rig.env, rig.project)["hooks_file"]), hold)
        log = tmp_path / "copilot.log"
        proc, _, sid, msg_id = mail_during(rig, host_procs, model, log, "work on it RUN_TOOL", "RUN_TOOL",
                                           f"{needle}: rebase again", needle)
        gate.touch()
        wait_for(hold.exists, 60, "the postToolUse hook to take the mail")
        pending = Path(pending_file(str(rig.bob.home / "bob" / "spool" / "sessions"), sid))
        assert pending.exists() and SessionMail(rig.bob.home / "bob", sid).waiting() == 0
        older_than_the_margin(pending)  # what Copilot writes after the kill is later
        hook = int(hold.read_text())
        assert hook in descendants(proc.pid)
        os.kill(hook, signal.SIGKILL)
        assert proc.wait(timeout=180) == 0, log.read_text()
        requests = model.requests
        assert needle not in requests[1]["trailing_text"], model.summary()  # the killed hook gave nothing
        assert model.count(needle) == 1 and steady(model, needle), model.summary()
        assert needle in requests[-1]["last_user_text"] and len(requests) == 3, model.summary()
        assert not pending.exists()  # the last stop saw it in the event log and forgot it
    assert Receipt.DELIVERED in handed_states(bob_layout(rig.bob), msg_id)


