"""The real Claude Code (tests/hosts/package.json) with a permission prompt open when peer mail
arrives: the doors hold it (alarms/hosts/claude/dialog.py), so the prompt stays as the person
left it, answerable, and the mail is handed over once, after the answer."""

from __future__ import annotations

import contextlib
import json
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Agent, wait_for
from tests.hosts.claude import interactive_claude, ready, spool_has
from tests.hosts.fake_model import FakeModel
from tests.hosts.peer_mail import copies_steady, long_text, outbox_state, send, whole_in
from tests.hosts.tmux import Tmux

# Claude Code asks before a command that writes, in manual mode (auto mode would decide itself).
ASKING = ("--permission-mode", "manual")
PROMPT = "Do you want to proceed?"
# How long the mail must stay held once it is in the spool: many of the monitor's 200 ms polls,
# and longer than Claude Code took to show an unheld frame above the prompt (under a second).
HELD_S = 5.0


def tool_touches(flag: Path) -> str:
    return f"touch {flag} && echo TOOL_RAN"


def record_of(host_home: Path, session: dict[str, Any]) -> dict[str, Any]:
    path = host_home / ".claude" / "sessions" / f"{session['pid']}.json"
    with contextlib.suppress(OSError, ValueError):
        data = json.loads(path.read_text())
        return data if isinstance(data, dict) else {}
    return {}


def prompt_open(tmux: Tmux, host_home: Path, session: dict[str, Any]) -> bool:
    return PROMPT in tmux.screen() and record_of(host_home, session).get("waitingFor") == "permission prompt"


def held_through(tmux: Tmux, model: FakeModel, needle: str, seconds: float) -> None:
    """For `seconds`, checked on every step: the prompt is on the screen, the mail is not."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        screen = tmux.screen()
        assert PROMPT in screen and needle not in screen, screen
        assert not model.find(needle, system=True), model.summary()
        time.sleep(0.2)


@pytest.mark.hosts
def test_mail_that_arrives_during_a_permission_prompt_waits_for_the_answer_and_comes_once(
    host_bin: Path, host_home: Path, project: Path, following: tuple[Agent, Agent, Path], tmp_path: Path,
) -> None:
    alice, bob, plugin = following
    ran, needle = tmp_path / "tool-ran", f"DURINGPROMPT{uuid.uuid4().hex[:8]}"
    text = long_text(needle, 3_000)
    with (FakeModel(tool_command=tool_touches(ran)) as model,
          interactive_claude(host_bin, host_home, project, plugin, model, *ASKING) as tmux):
        session = ready(tmux, bob)
        tmux.submit("work on it RUN_TOOL", lambda: model.first_seen("RUN_TOOL"))
        wait_for(lambda: prompt_open(tmux, host_home, session), 60, "the permission prompt")
        msg_id = send(alice, text)
        wait_for(lambda: spool_has(bob, needle), 60, "the mail in bob's spool")
        held_through(tmux, model, needle, HELD_S)
        assert not ran.exists()
        tmux.keys("Enter")  # the person answers: 1. Yes
        wait_for(ran.exists, 60, "the tool to run")
        seen = model.wait_for(f"{needle}-END", timeout=60, system=True)
        assert whole_in(seen, needle, text), model.summary()
        assert not any("doesn't want to proceed" in t for t in seen["texts"])  # the tool was not refused
        wait_for(lambda: outbox_state(alice, msg_id) == "delivered", 60, "alice's `delivered` receipt")
        assert copies_steady(model, f"{needle}-END"), model.summary()


@pytest.mark.hosts
def test_a_prompt_refused_with_esc_is_refused_and_the_held_mail_comes_once_after(
    host_bin: Path, host_home: Path, project: Path, following: tuple[Agent, Agent, Path], tmp_path: Path,
) -> None:
    """Esc ends the turn and the session turns idle, not busy: the hold ends there too. The mail
    then starts a turn, and Claude Code sends it with the refusal in one user turn."""
    alice, bob, plugin = following
    ran, needle = tmp_path / "tool-ran", f"REFUSED{uuid.uuid4().hex[:8]}"
    with (FakeModel(tool_command=tool_touches(ran)) as model,
          interactive_claude(host_bin, host_home, project, plugin, model, *ASKING) as tmux):
        session = ready(tmux, bob)
        tmux.submit("work on it RUN_TOOL", lambda: model.first_seen("RUN_TOOL"))
        wait_for(lambda: prompt_open(tmux, host_home, session), 60, "the permission prompt")
        send(alice, f"a peer asks {needle}")
        wait_for(lambda: spool_has(bob, needle), 60, "the mail in bob's spool")
        held_through(tmux, model, needle, HELD_S)
        tmux.keys("Escape")  # the person refuses
        seen = model.wait_for(needle, timeout=60, system=True)
        turn = seen["last_user_text"]
        assert 0 <= turn.find("Request interrupted by user") < turn.find(needle), turn  # after the refusal
        assert not ran.exists()
        assert model.count_new(needle) == 1, model.summary()
