"""Claude Code's inbox socket as talk's door (alarms/hosts/claude/inbox.py), and its fallback.

Fast tests run the pure parts and the door against a Unix socket standing in for Claude Code's.
The `hosts` tests run the real `claude` (tests/hosts/package.json) against the fake model, with a
real relay and bob's real follower: mail alice sends reaches the model whole and once through the
session's own inbox, interactive (tmux) and `claude -p`, idle and mid-turn; and, with messaging
off, through the monitor's notice and the Stop hook, whole however long.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import uuid
from pathlib import Path

import pytest

from durable.receipt_states import Receipt
from tests.conftest import Agent, wait_for
from tests.hosts.claude import BASH_ALLOWED, interactive_claude, ready, spool_has, tool_waits_for
from tests.hosts.configs import CLAUDE_NO_INBOX, claude_env, seed_claude_home
from tests.hosts.fake_model import FakeModel
from tests.hosts.npm import host_env
from tests.hosts.peer_mail import (
    bob_layout,
    copies_steady,
    handed_states,
    long_text,
    outbox_state,
    send,
    steady,
    whole_in,
)
from tests.hosts.procs import ProcessGroup, descendants
from tests.hosts.roles import MAIL, arrives_as_claimed

# --- the real Claude Code -------------------------------------------------------------------------


@pytest.mark.hosts
def test_idle_interactive_claude_gets_60_kb_whole_and_once_through_its_inbox(
    host_bin: Path, host_home: Path, project: Path, following: tuple[Agent, Agent, Path],
) -> None:
    alice, bob, plugin = following
    needle = f"BIGIDLE{uuid.uuid4().hex[:8]}"
    text = f"{MAIL}\n{long_text(needle, 60_000)}"
    with (FakeModel() as model,
          interactive_claude(host_bin, host_home, project, plugin, model, *BASH_ALLOWED) as tmux):
        ready(tmux, bob)
        before = len(model.requests)
        msg_id = send(alice, text)
        seen = model.wait_for(f"{needle}-END", timeout=90)
        assert seen["n"] == before + 1  # no keystroke: the inbox started the turn
        assert "Another Claude session sent a message" in seen["last_user_text"]  # the inbox, not a hook
        assert whole_in(seen, needle, text), model.summary()
        arrives_as_claimed(seen, f"{needle}-END", "Claude Code 2", "idle")
        wait_for(lambda: outbox_state(alice, msg_id) == "delivered", 60, "alice's `delivered` receipt")
        assert handed_states(bob_layout(bob), msg_id) == [Receipt.WRITTEN, Receipt.DELIVERED]
        # A later turn: the hooks run again and must hand over nothing.
        tmux.submit("anything else?", lambda: model.first_seen("anything else?"))
        assert copies_steady(model, f"{needle}-END"), model.summary()


@pytest.mark.hosts
def test_busy_interactive_claude_gets_mail_at_the_next_tool_call_boundary(
    host_bin: Path, host_home: Path, project: Path, following: tuple[Agent, Agent, Path], tmp_path: Path,
) -> None:
    alice, bob, plugin = following
    flag, needle = tmp_path / "tool-may-end", f"MIDTURN{uuid.uuid4().hex[:8]}"
    text = f"{MAIL}\n{long_text(needle, 60_000)}"
    with (FakeModel(tool_command=tool_waits_for(flag)) as model,
          interactive_claude(host_bin, host_home, project, plugin, model, *BASH_ALLOWED) as tmux):
        ready(tmux, bob)
        # The call is made; the tool runs until the flag.
        tmux.submit("work on it RUN_TOOL", lambda: model.first_seen("RUN_TOOL"))
        msg_id = send(alice, text)
        wait_for(lambda: bob_layout(bob).handed.exists()
                 and Receipt.WRITTEN in handed_states(bob_layout(bob), msg_id), 60, "the monitor's write")
        assert not model.find(needle, system=True)  # waits in Claude Code's queue: no tool is cut short
        flag.touch()
        seen = model.wait_for(f"{needle}-END", timeout=60, system=True)
        assert "TOOL_DONE" in seen["trailing_text"]  # the same turn, right after the tool's result
        assert whole_in(seen, needle, text), model.summary()
        arrives_as_claimed(seen, f"{needle}-END", "Claude Code 2", "mid-turn")
        wait_for(lambda: outbox_state(alice, msg_id) == "delivered", 60, "alice's `delivered` receipt")
        assert copies_steady(model, f"{needle}-END"), model.summary()


@pytest.mark.hosts
def test_claude_print_gets_waiting_and_mid_turn_mail_whole_and_once_through_its_inbox(
    host_bin: Path, host_home: Path, host_procs: ProcessGroup, project: Path,
    following: tuple[Agent, Agent, Path], tmp_path: Path,
) -> None:
    """`claude -p` runs no monitor: its hooks write to the inbox (UserPromptSubmit for mail that
    waited, PostToolUse for mail that came during the tool call)."""
    alice, bob, plugin = following
    flag = tmp_path / "tool-may-end"
    waiting, mid = f"WAITING{uuid.uuid4().hex[:8]}", f"PMID{uuid.uuid4().hex[:8]}"
    waiting_text, mid_text = long_text(waiting, 60_000), long_text(mid, 60_000)
    waiting_id = send(alice, waiting_text)
    wait_for(lambda: spool_has(bob, waiting), 30, "the waiting mail in bob's spool")
    with FakeModel(tool_command=tool_waits_for(flag)) as model:
        seed_claude_home(host_home, project)
        env = host_env(host_home, **claude_env(model.url))
        claude = host_procs.start(
            [host_bin / "claude", "-p", "work on it RUN_TOOL", "--plugin-dir", plugin,
             "--allowedTools", "Bash"],
            cwd=project, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )
        model.wait_for("RUN_TOOL", timeout=60)
        mid_id = send(alice, mid_text)
        wait_for(lambda: spool_has(bob, mid), 30, "the mid-turn mail in bob's spool")
        flag.touch()
        _, err = claude.communicate(timeout=120)
        assert claude.returncode == 0, err
        for needle, text in ((waiting, waiting_text), (mid, mid_text)):
            seen = model.wait_for(f"{needle}-END", timeout=10, system=True)
            assert whole_in(seen, needle, text), model.summary()
            assert copies_steady(model, f"{needle}-END"), model.summary()
    assert handed_states(bob_layout(bob), waiting_id)[0] == Receipt.WRITTEN
    assert handed_states(bob_layout(bob), mid_id)[0] == Receipt.WRITTEN
    (session,) = bob.ok("session", "list", "--json").json()
    assert session["unread"] == 0


@pytest.mark.hosts
def test_without_an_inbox_a_notice_wakes_the_session_and_the_stop_hook_hands_long_mail_whole(
    host_bin: Path, host_home: Path, project: Path, following: tuple[Agent, Agent, Path],
) -> None:
    """Messaging off: the monitor's line (trimmed by Claude Code to ~500 characters) carries only a
    notice; the turn it starts ends in the Stop hook, which hands the 3.6 KB message over whole."""
    alice, bob, plugin = following
    needle = f"LONGFALLBACK{uuid.uuid4().hex[:8]}"
    text = long_text(needle, 3_600)
    with (FakeModel() as model,
          interactive_claude(host_bin, host_home, project, plugin, model, *BASH_ALLOWED,
                             **CLAUDE_NO_INBOX) as tmux):
        session = ready(tmux, bob)
        record = host_home / ".claude" / "sessions" / f"{session['pid']}.json"
        assert not record.exists() or "messagingSocketPath" not in json.loads(record.read_text())  # no inbox
        before = len(model.requests)
        msg_id = send(alice, text)
        woken = model.wait_for("new peer message is waiting", timeout=60)
        assert woken["n"] == before + 1  # no keystroke: the notice started the turn
        notices = [t for t in woken["texts"] if "new peer message is waiting" in t]
        assert notices and not any(needle in t or msg_id in t for t in notices)  # nothing of the peer's
        # The hooks of that turn hand the message over (as context, or in the Stop hook's reason).
        seen = model.wait_for(f"{needle}-END", timeout=60, system=True)
        assert whole_in(seen, needle, text), model.summary()
        wait_for(lambda: outbox_state(alice, msg_id) == "delivered", 60, "alice's `delivered` receipt")
        assert handed_states(bob_layout(bob), msg_id) == [Receipt.DELIVERED]
        tmux.submit("anything else?", lambda: model.first_seen("anything else?"))
        assert steady(model, f"{needle}-END"), model.summary()


@pytest.mark.hosts
def test_kill_9_of_the_inbox_writing_monitor_loses_nothing_and_repeats_nothing(
    host_bin: Path, host_home: Path, project: Path, following: tuple[Agent, Agent, Path],
) -> None:
    alice, bob, plugin = following
    with (FakeModel() as model,
          interactive_claude(host_bin, host_home, project, plugin, model, *BASH_ALLOWED) as tmux):
        session = ready(tmux, bob)

        def monitors() -> list[int]:
            found = []
            for pid in descendants(session["pid"]):
                with contextlib.suppress(OSError):
                    if b"alarms.hosts.claude.monitor" in Path(f"/proc/{pid}/cmdline").read_bytes():
                        found.append(pid)
            return found

        wait_for(lambda: bool(monitors()), 30, "the monitor process")
        needles = [f"FLOW{i}x{uuid.uuid4().hex[:8]}" for i in range(6)]
        for needle in needles[:3]:
            send(alice, f"flowing {needle}")
        model.wait_for(needles[0], timeout=60)
        for pid in monitors():
            os.kill(pid, 9)  # while the rest is still on its way
        for needle in needles[3:]:
            send(alice, f"flowing {needle}")
        spool = bob.home / "bob" / "spool" / "sessions" / f"{session['sid']}.ndjson"
        wait_for(lambda: all(n in spool.read_text() for n in needles), 60, "all mail in the spool")
        # No monitor now: this prompt's hook hands the rest over.
        tmux.submit("anything new?", lambda: model.first_seen("anything new?"))
        for needle in needles:
            model.wait_for(needle, timeout=60, system=True)
        tmux.submit("and now?", lambda: model.first_seen("and now?"))
        for needle in needles:
            assert steady(model, needle), (needle, model.summary())


@pytest.mark.hosts
def test_without_an_inbox_claude_print_hands_long_mail_whole_at_stop_and_too_long_mail_as_written(
    host_bin: Path, host_home: Path, host_procs: ProcessGroup, project: Path,
    following: tuple[Agent, Agent, Path],
) -> None:
    """Too long for added context (10,000 characters), 20 KB waits for Stop and is shown whole;
    60 KB is too long even for Stop: Claude Code saves it whole to a file, the note says so, and
    the receipt stays `written`."""
    alice, bob, plugin = following
    mid, huge = f"STOPWHOLE{uuid.uuid4().hex[:8]}", f"TOOLONG{uuid.uuid4().hex[:8]}"
    mid_text, huge_text = long_text(mid, 20_000), long_text(huge, 60_000)
    mid_id, huge_id = send(alice, mid_text), send(alice, huge_text)
    wait_for(lambda: spool_has(bob, mid) and spool_has(bob, huge), 30, "both messages in bob's spool")
    with FakeModel() as model:
        seed_claude_home(host_home, project)
        env = host_env(host_home, **claude_env(model.url), **CLAUDE_NO_INBOX)
        done = host_procs.run([host_bin / "claude", "-p", "hello", "--plugin-dir", plugin], cwd=project,
                              env=env, timeout=120)
        assert done.returncode == 0, done.stderr
        seen = model.wait_for(f"{mid}-END", timeout=10)
        assert "Stop hook feedback:" in seen["last_user_text"] and whole_in(seen, mid, mid_text)
        assert steady(model, f"{mid}-END"), model.summary()
        noted = model.wait_for(f"{huge}-START", timeout=10)
        assert "saved whole in the file named here" in noted["last_user_text"]
        assert not any(whole_in(r, huge, huge_text) for r in model.requests)  # cut: so only `written`
    assert handed_states(bob_layout(bob), mid_id) == [Receipt.DELIVERED]
    assert handed_states(bob_layout(bob), huge_id) == [Receipt.WRITTEN]
    wait_for(lambda: outbox_state(alice, huge_id) == "written", 60, "alice's `written` receipt")
