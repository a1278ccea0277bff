"""The Claude Code alarm: talk's plugin (a monitor plus hooks) and `talk install claude`.

Fast tests run the pure parts and the plugin's real launchers (bash, then the recorded
interpreter) against a real spool. The `hosts` tests run the real `claude` (tests/hosts/
package.json) against the fake model, with a real relay and bob's real follower: mail alice
sends reaches the model through the Stop hook or added context in `claude -p` without an inbox
socket, and survives kills of the monitor and of a hook, each message exactly once. The inbox
socket's own tests are in tests/hosts/test_claude_inbox.py.
"""

from __future__ import annotations

import contextlib
import fnmatch
import json
import os
import queue
import shlex
import signal
import subprocess
import sys
import threading
import time
import tomllib
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from alarms.hosts.claude.hook import parse_payload, reply
from alarms.hosts.claude.install import MONITOR, env_text, marketplace, monitor_source, plugin_source
from alarms.hosts.claude.monitor import notice
from alarms.hosts.claude.session import pid_from_env, session_id
from spool_writer.record import SpoolRecord
from spool_writer.spool import Spool, received_now
from tests.conftest import REPO, Agent, RelayProcess, make_agent, wait_for
from tests.hosts.claude import BASH_ALLOWED, interactive_claude, live_session, spool_has
from tests.hosts.configs import CLAUDE_NO_INBOX, claude_env, seed_claude_home
from tests.hosts.fake_model import FakeModel
from tests.hosts.npm import host_env
from tests.hosts.peer_mail import older_than_the_margin
from tests.hosts.procs import ProcessGroup, descendants
from tests.hosts.roles import MAIL, arrives_as_claimed
from tests.hosts.talk_install import install_plugin

PLAIN_PATH = "/usr/bin:/bin"  # no `talk` and no pyenv shim: the launchers must use talk.env


# --- helpers ---------------------------------------------------------------------------------------


def alarm_env(host_pid: int, **extra: str) -> dict[str, str]:
    """What Claude Code gives a monitor or hook, minus talk's variables (talk.env has them)."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("TALK_", "CLAUDE")) and k != "PATH"}
    return {**env, "PATH": PLAIN_PATH, "CLAUDE_PID": str(host_pid), **extra}


def run_hook(plugin: Path, env: dict[str, str], event: str, sid: str) -> dict[str, Any]:
    payload = {"session_id": sid, "hook_event_name": event, "cwd": "/", "stop_hook_active": False}
    done = subprocess.run(["bash", str(plugin / "scripts" / "claude_hook.sh")], input=json.dumps(payload),
                          capture_output=True, text=True, env=env, timeout=30)
    assert done.returncode == 0, done.stderr
    out: dict[str, Any] = json.loads(done.stdout)
    return out


def deliver(folder: Path, text: str) -> str:
    """Write one message into an identity's spool as the follower does (the real writer)."""
    msg_id = uuid.uuid4().hex
    Spool(folder / "spool").deliver({"id": msg_id, "from": "f" * 32, "name": "alice", "text": text,
                                     "ts": received_now(), "kind": "message", "received": received_now()})
    return msg_id


class Monitor:
    """The plugin's monitor launcher as Claude Code runs it; stdout lines are collected as they come."""

    def __init__(self, plugin: Path, env: dict[str, str], arg: str) -> None:
        self.proc = subprocess.Popen(
            ["bash", str(plugin / "scripts" / "claude_monitor.sh"), arg], env=env, text=True,
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )
        self.lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line.rstrip("\n"))

    def next_line(self, timeout: float) -> str:
        return self.lines.get(timeout=timeout)

    def stop(self) -> str:
        """Kill it (if still running) and return its stderr."""
        if self.proc.poll() is None:
            self.proc.kill()
        _, err = self.proc.communicate(timeout=10)
        return err


@pytest.fixture
def host_stand_in() -> Iterator[subprocess.Popen[bytes]]:
    """A process standing in for Claude Code: the session lives while it runs."""
    proc = subprocess.Popen(["sleep", "300"])
    yield proc
    proc.kill()
    proc.wait()


@pytest.fixture
def mailbox(tmp_path: Path, relay: RelayProcess) -> tuple[Agent, Path]:
    """bob, a real identity, and the plugin installed for his TALK_HOME."""
    bob = make_agent(tmp_path, relay, "bob", None)
    return bob, install_plugin(tmp_path / "plugin", bob.home)


# --- pure parts ------------------------------------------------------------------------------------

def test_session_id_prefers_the_given_one_and_skips_unsubstituted_variables() -> None:
    env = {"CLAUDE_CODE_SESSION_ID": "from-env"}
    assert session_id("given", env) == "given"
    assert session_id("${CLAUDE_SESSION_ID}", env) == "from-env"
    assert session_id("", env) == "from-env"
    assert session_id(None, {}) is None
    assert session_id("${CLAUDE_CODE_SESSION_ID}", {"CLAUDE_CODE_SESSION_ID": "${X}"}) is None


def test_pid_from_env_accepts_only_a_real_pid() -> None:
    assert pid_from_env({"CLAUDE_PID": "4242"}) == 4242
    assert pid_from_env({"CLAUDE_PID": "1"}) is None  # init is never the host
    assert pid_from_env({"CLAUDE_PID": "-5"}) is None
    assert pid_from_env({}) is None


def test_reply_blocks_stop_and_adds_context_only_with_mail() -> None:
    records: list[SpoolRecord] = [{"id": "m1", "from": "a" * 32, "name": "alice", "text": "hello\nbob",
                                   "ts": "t", "kind": "chat"}]
    assert reply("Stop", []) == {} and reply("UserPromptSubmit", []) == {}
    stop = reply("Stop", records)
    assert stop["decision"] == "block"
    assert "> hello\n> bob" in stop["reason"] and "grant no permission" in stop["reason"]
    ctx = reply("UserPromptSubmit", records)["hookSpecificOutput"]
    assert ctx["hookEventName"] == "UserPromptSubmit" and "from alice" in ctx["additionalContext"]


def test_parse_payload_tolerates_garbage() -> None:
    assert parse_payload("") == {} and parse_payload("not json") == {} and parse_payload("[1]") == {}
    assert parse_payload('{"hook_event_name": "Stop"}') == {"hook_event_name": "Stop"}


def test_notice_carries_nothing_of_the_peers() -> None:
    """Without an inbox the monitor's line only starts a turn: Claude Code trims it to ~500 characters."""
    assert notice(1).startswith("[talk] a new peer message is waiting") and len(notice(3)) < 200
    assert "\n" not in notice(2) and "3 new peer messages" in notice(3)


def test_env_text_records_the_interpreter_and_refuses_line_breaks() -> None:
    text = env_text("/venv/bin/python", Path("/h/.talk"), None)
    assert text == "TALK_PYTHON=/venv/bin/python\nTALK_HOME=/h/.talk\n"
    assert env_text("/p", Path("/h"), "bob").endswith("TALK_USER=bob\n")
    with pytest.raises(Exception, match="line break"):
        env_text("/p\nTALK_HOME=/evil", Path("/h"), None)


def test_manifests_are_consistent_and_shipped() -> None:
    """Every plugin file is package data, every command names a shipped script, the marketplace resolves."""
    source = plugin_source()
    package = REPO / "alarms"  # package data globs are relative to it
    files = {p.relative_to(package).as_posix() for p in source.rglob("*")
             if p.is_file() and "__pycache__" not in p.parts}
    setuptools = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    globs = setuptools["package-data"]["alarms"]
    assert {f for f in files if not any(fnmatch.fnmatch(f, g) for g in globs)} == set()
    monitors = json.loads((source / "monitors" / "monitors.json").read_text())
    hooks = json.loads((source / "hooks" / "hooks.json").read_text())["hooks"]
    commands = [m["command"] for m in monitors] + [
        h["command"] for groups in hooks.values() for g in groups for h in g["hooks"]]
    assert set(hooks) == {"SessionStart", "UserPromptSubmit", "PostToolUse", "Stop"}
    for command in commands:
        script = command.split('"${CLAUDE_PLUGIN_ROOT}/')[1].split('"')[0]
        assert (source / script).is_file() and os.access(source / script, os.X_OK), script
    market = json.loads((REPO / ".claude-plugin" / "marketplace.json").read_text())
    (entry,) = market["plugins"]
    manifest = json.loads((REPO / entry["source"] / ".claude-plugin" / "plugin.json").read_text())
    assert entry["name"] == manifest["name"] == "talk" and market["owner"]["name"]
    assert marketplace("d")["plugins"][0]["source"] == "./"
    assert monitor_source().relative_to(package).as_posix() in globs


def test_the_adapter_in_alarms_runs_the_plugins_launcher() -> None:
    """The plugin folder, which a marketplace install from the repository gets alone, holds the
    launcher; alarms/claude_monitor.sh (where the design names it) only runs that one."""
    adapter = REPO / "alarms" / "claude_monitor.sh"
    assert monitor_source() == adapter.resolve() and os.access(adapter, os.X_OK)
    assert os.access(plugin_source() / MONITOR, os.X_OK)
    assert "hosts/claude/plugin/" + MONITOR in adapter.read_text()


def test_the_adapter_runs_from_alarms_too(tmp_path: Path) -> None:
    """Run where it ships, it finds the plugin's talk_python.sh: here the interpreter named by
    the `talk` on PATH, a stand-in that echoes what it was asked to run."""
    (tmp_path / "talk").write_text("#!/bin/echo\n")
    (tmp_path / "talk").chmod(0o755)
    env = {**alarm_env(os.getpid()), "PATH": f"{tmp_path}:{PLAIN_PATH}"}
    done = subprocess.run(["bash", str(monitor_source()), "sess-1"], env=env, capture_output=True,
                          text=True, timeout=30)
    assert (done.returncode, done.stdout, done.stderr) == (
        0, "-I -m alarms.hosts.claude.monitor sess-1\n", "")


# --- the launchers, for real, without Claude Code -------------------------------------------------

def test_install_writes_a_loadable_plugin_with_the_interpreter_baked_in(tmp_path: Path) -> None:
    plugin = install_plugin(tmp_path / "p", tmp_path / "talkhome")
    env = dict(line.split("=", 1) for line in (plugin / "talk.env").read_text().splitlines())
    assert env["TALK_PYTHON"] == sys.executable and Path(env["TALK_PYTHON"]).is_absolute()
    assert env["TALK_HOME"] == str((tmp_path / "talkhome").resolve())
    for script in ("claude_monitor.sh", "claude_hook.sh"):
        assert os.access(plugin / "scripts" / script, os.X_OK)
    assert (plugin / MONITOR).read_bytes() == (plugin_source() / MONITOR).read_bytes()
    assert json.loads((plugin / ".claude-plugin" / "plugin.json").read_text())["name"] == "talk"
    assert install_plugin(tmp_path / "p", tmp_path / "talkhome") == plugin  # again: replaced, no error


def test_hooks_register_then_hand_on_mail_once(
    mailbox: tuple[Agent, Path], host_stand_in: subprocess.Popen[bytes]
) -> None:
    bob, plugin = mailbox
    env, sid = alarm_env(host_stand_in.pid), "sess-hook-1"
    waiting = deliver(bob.home / "bob", "waiting in the inbox")
    assert run_hook(plugin, env, "SessionStart", sid) == {}  # registers; starts no turn
    (session,) = bob.ok("session", "list", "--json").json()
    assert (session["sid"], session["host"], session["pid"], session["alive"]) == (
        sid, "claude", host_stand_in.pid, True)
    assert session["unread"] == 1  # took the inbox over, left for the monitor
    ctx = run_hook(plugin, env, "UserPromptSubmit", sid)["hookSpecificOutput"]["additionalContext"]
    assert waiting in ctx and "waiting in the inbox" in ctx
    new = deliver(bob.home / "bob", "arrived during the turn")
    stop = run_hook(plugin, env, "Stop", sid)
    assert stop["decision"] == "block" and new in stop["reason"] and waiting not in stop["reason"]
    assert run_hook(plugin, env, "Stop", sid) == {}  # nothing twice: the Stop hook cannot loop


def test_shipped_plugin_without_talk_env_finds_python_from_the_talk_script(
    mailbox: tuple[Agent, Path], host_stand_in: subprocess.Popen[bytes]
) -> None:
    """As installed from the marketplace: no talk.env, so the interpreter comes from `talk`'s shebang."""
    bob, _ = mailbox
    talk_dir = Path(sys.executable).parent
    assert (talk_dir / "talk").read_text().startswith("#!/")
    env = alarm_env(host_stand_in.pid, PATH=f"{talk_dir}:{PLAIN_PATH}", TALK_HOME=str(bob.home))
    msg = deliver(bob.home / "bob", "found without talk.env")
    stop = run_hook(plugin_source(), env, "Stop", "sess-market-1")
    assert stop["decision"] == "block" and msg in stop["reason"]
    (session,) = bob.ok("session", "list", "--json").json()
    assert (session["sid"], session["host"]) == ("sess-market-1", "claude")


def test_hook_without_identity_or_session_lets_the_turn_go_on(
    tmp_path: Path, host_stand_in: subprocess.Popen[bytes]
) -> None:
    plugin = install_plugin(tmp_path / "p", tmp_path / "empty-home")
    env = alarm_env(host_stand_in.pid)
    done = subprocess.run(["bash", str(plugin / "scripts" / "claude_hook.sh")],
                          input='{"hook_event_name":"Stop","session_id":"s1"}',
                          capture_output=True, text=True, env=env, timeout=30)
    assert (done.returncode, done.stdout.strip()) == (0, "{}")
    assert "0 identities" in done.stderr


def test_monitor_prints_each_message_once_shares_the_cursor_and_ends_with_its_host(
    mailbox: tuple[Agent, Path], host_stand_in: subprocess.Popen[bytes]
) -> None:
    bob, plugin = mailbox
    sid = "sess-mon-1"
    env = alarm_env(host_stand_in.pid, CLAUDE_CODE_SESSION_ID=sid)
    early = deliver(bob.home / "bob", "sent before the session began")
    monitor = Monitor(plugin, env, "${CLAUDE_CODE_SESSION_ID}")  # unsubstituted: falls back to env
    try:
        # No inbox socket here: a notice per arrival, and the Stop hook hands the mail over.
        assert monitor.next_line(timeout=10) == notice(1)
        later = deliver(bob.home / "bob", "sent while watching")
        assert monitor.next_line(timeout=5) == notice(2)
        reason = run_hook(plugin, env, "Stop", sid)["reason"]
        assert early in reason and later in reason
        assert run_hook(plugin, env, "Stop", sid) == {}
        host_stand_in.kill()
        host_stand_in.wait()
        assert monitor.proc.wait(timeout=5) == 0  # the session ended, so did the monitor
        assert monitor.lines.empty()
    finally:
        monitor.stop()


def test_monitor_without_a_session_id_stays_quiet_until_its_host_ends(
    tmp_path: Path, host_stand_in: subprocess.Popen[bytes]
) -> None:
    plugin = install_plugin(tmp_path / "p", tmp_path / "talkhome")
    monitor = Monitor(plugin, alarm_env(host_stand_in.pid), "${CLAUDE_CODE_SESSION_ID}")
    try:
        time.sleep(0.5)
        assert monitor.proc.poll() is None and monitor.lines.empty()
        host_stand_in.kill()
        host_stand_in.wait()
        assert monitor.proc.wait(timeout=5) == 0
        _, err = monitor.proc.communicate(timeout=5)
        assert "no Claude Code session id" in err
    finally:
        monitor.stop()


# --- the real Claude Code -------------------------------------------------------------------------

def delivered_once(model: FakeModel, needle: str) -> bool:
    """Whether the model was handed needle exactly once.

    Claude Code resends the conversation with each request, so from the request that first
    carries a delivery on, every request holds the same number of copies of it (Claude Code
    may show one delivery twice: a Stop hook's reason is both "Stop hook feedback" and a
    "blocking error" note). A second delivery raises that number; it would also be new input
    in a second request, which `count` sees. Added context sits in system texts, so they count.
    """
    copies = [sum(t.count(needle) for t in r["texts"] + r["system_texts"]) for r in model.requests]
    carried = [c for c in copies if c]
    return bool(carried) and all(c == carried[0] for c in carried) and model.count(needle) <= 1


@pytest.mark.hosts
def test_claude_print_gets_waiting_mail_and_mail_sent_mid_turn_exactly_once(
    host_bin: Path, host_home: Path, host_procs: ProcessGroup, project: Path,
    following: tuple[Agent, Agent, Path],
) -> None:
    alice, bob, plugin = following
    waiting, mid = f"WAITING-{uuid.uuid4().hex[:8]}", f"MIDTURN-{uuid.uuid4().hex[:8]}"
    alice.ok("send", "bob", f"before the session: {waiting}\n{MAIL}")
    wait_for(lambda: spool_has(bob, waiting), 10, "the waiting message in bob's inbox")
    with FakeModel(slow_delay=0.4) as model:
        seed_claude_home(host_home, project)
        env = host_env(host_home, **claude_env(model.url), **CLAUDE_NO_INBOX)  # the hooks' own doors
        claude = host_procs.start(
            [host_bin / "claude", "-p", "SLOW_REPLY please", "--plugin-dir", plugin], cwd=project,
            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )
        first = model.wait_for(waiting, timeout=60, system=True)  # UserPromptSubmit's added context
        assert "SLOW_REPLY please" in first["last_user_text"]
        arrives_as_claimed(first, waiting, "Claude Code without", "UserPromptSubmit")
        alice.ok("send", "bob", f"during the turn: {mid}\n{MAIL}")
        out, err = claude.communicate(timeout=90)
        assert claude.returncode == 0, err
        assert "FAKE_OK [req 2]" in out  # the session ended with the Stop hook's extra turn
        stopped = model.wait_for(mid, timeout=5)
        assert "Stop hook feedback:" in stopped["last_user_text"]  # the Stop hook's turn
        arrives_as_claimed(stopped, mid, "Claude Code without", "Stop")
        assert model.count(mid) == 1 and delivered_once(model, mid), model.summary()
        assert model.count(waiting) == 0 and delivered_once(model, waiting), model.summary()
        assert len(model.requests) == 2, model.summary()
    (session,) = bob.ok("session", "list", "--json").json()
    assert session["host"] == "claude" and session["unread"] == 0


@pytest.mark.hosts
def test_without_an_inbox_mail_sent_during_a_tool_call_comes_with_its_result_as_context(
    host_bin: Path, host_home: Path, host_procs: ProcessGroup, project: Path,
    following: tuple[Agent, Agent, Path], tmp_path: Path,
) -> None:
    """The PostToolUse hook's door: Claude Code shows its added context as a system message, so
    the frame says so."""
    alice, bob, plugin = following
    flag, mid = tmp_path / "tool-may-end", f"POSTTOOL-{uuid.uuid4().hex[:8]}"
    with FakeModel(tool_command=f"while [ ! -e {flag} ]; do sleep 0.05; done; echo TOOL_DONE") as model:
        seed_claude_home(host_home, project)
        env = host_env(host_home, **claude_env(model.url), **CLAUDE_NO_INBOX)
        claude = host_procs.start(
            [host_bin / "claude", "-p", "work on it RUN_TOOL", "--plugin-dir", plugin, *BASH_ALLOWED],
            cwd=project, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )
        model.wait_for("RUN_TOOL", timeout=60)
        alice.ok("send", "bob", f"during the tool call: {mid}\n{MAIL}")
        wait_for(lambda: spool_has(bob, mid), 30, "the mail in bob's spool")
        flag.touch()
        _, err = claude.communicate(timeout=90)
        assert claude.returncode == 0, err
        seen = model.wait_for(mid, timeout=5, system=True)
        assert "TOOL_DONE" in seen["trailing_text"]  # the request right after the tool's result
        arrives_as_claimed(seen, mid, "Claude Code without", "PostToolUse")
        assert delivered_once(model, mid), model.summary()


def spool_arrival(bob: Agent, needle: str, timeout: float) -> float:
    """The wall-clock time a line holding needle is first seen in bob's spool."""
    wait_for(lambda: spool_has(bob, needle), timeout, f"{needle} in the spool", step=0.005)
    return time.time()


def monitor_pids(claude_pid: int) -> list[int]:
    found = []
    for pid in descendants(claude_pid):
        with contextlib.suppress(OSError):
            if b"alarms.hosts.claude.monitor" in Path(f"/proc/{pid}/cmdline").read_bytes():
                found.append(pid)
    return found


@pytest.mark.hosts
def test_kill_9_of_the_monitor_in_claude_loses_nothing_and_repeats_nothing(
    host_bin: Path, host_home: Path, project: Path, following: tuple[Agent, Agent, Path],
    fake_model: FakeModel,
) -> None:
    alice, bob, plugin = following
    with interactive_claude(host_bin, host_home, project, plugin, fake_model) as tmux:
        session = wait_for(lambda: live_session(bob), 30, "the monitor to register the session",
                           step=0.2)
        tmux.wait_shown("1 monitor", what="the idle UI")
        (monitor,) = wait_for(lambda: monitor_pids(session["pid"]), 10, "the monitor process")
        needles = [f"FLOW{i}-{uuid.uuid4().hex[:8]}" for i in range(6)]
        for needle in needles[:3]:
            alice.ok("send", "bob", f"flowing {needle}")
        fake_model.wait_for(needles[0], timeout=10)
        os.kill(monitor, signal.SIGKILL)  # while the rest is still on its way
        for needle in needles[3:]:
            alice.ok("send", "bob", f"flowing {needle}")
        wait_for(lambda: all(spool_has(bob, n) for n in needles), 10, "all mail in the spool")
        time.sleep(1)
        if not all(fake_model.find(n, system=True) for n in needles):
            # No monitor wakes the session now: the user's next prompt, or its Stop hook, delivers.
            tmux.keys("anything new?", "Enter")
        for needle in needles:
            fake_model.wait_for(needle, timeout=30, system=True)
        time.sleep(2)
        assert all(delivered_once(fake_model, n) for n in needles), fake_model.summary()


# --- exactly once: a hook killed after taking mail -------------------------------------------------

def test_monitor_reconciles_at_start_then_only_while_pending() -> None:
    from alarms.hosts.claude.monitor import RECONCILE_S, reconcile_due

    assert reconcile_due(None, 0.0, pending_exists=False)
    assert not reconcile_due(10.0, 10.0 + RECONCILE_S, pending_exists=False)
    assert not reconcile_due(10.0, 10.0 + RECONCILE_S / 2, pending_exists=True)
    assert reconcile_due(10.0, 10.0 + RECONCILE_S, pending_exists=True)


def test_transcript_path_is_found_by_session_id(tmp_path: Path) -> None:
    from alarms.hosts.claude.session import transcript_path

    folder = tmp_path / ".claude" / "projects" / "-some-project"
    folder.mkdir(parents=True)
    assert transcript_path("s-1", {"HOME": str(tmp_path)}) is None
    (folder / "s-1.jsonl").write_text("{}\n")
    assert transcript_path("s-1", {"HOME": str(tmp_path)}) == str(folder / "s-1.jsonl")
    assert transcript_path("s-1", {"CLAUDE_CONFIG_DIR": str(tmp_path / "x")}) is None


HELD_HOOK = Path(__file__).resolve().parent / "held_hook.py"
HOOK_LAUNCH = 'exec "$TALK_PYTHON" -I -m alarms.hosts.claude.hook'


@contextlib.contextmanager
def held_hook(plugin: Path, hold: Path) -> Iterator[None]:
    """Inside the block the plugin's hook launcher runs talk's hook through tests/hosts/held_hook.py:
    the same hook, held once it has taken mail (its pid in `hold`); talk's own launcher after."""
    script = plugin / "scripts" / "claude_hook.sh"
    text = script.read_text()
    assert text.count(HOOK_LAUNCH) == 1, text
    held = HOOK_LAUNCH.replace(" -m ", f" {shlex.join([str(HELD_HOOK), str(hold)])} -m ")
    script.unlink()  # a new file: the installed copy is changed, never what it was copied from
    script.write_text(text.replace(HOOK_LAUNCH, held))
    try:
        yield
    finally:
        script.unlink()
        script.write_text(text)


@pytest.mark.hosts
def test_stop_hook_killed_after_taking_mail_hands_it_on_next_prompt_exactly_once(
    host_bin: Path, host_home: Path, host_procs: ProcessGroup, project: Path,
    following: tuple[Agent, Agent, Path], tmp_path: Path,
) -> None:
    """SIGKILL between the cursor's move and Claude Code reading the Stop hook's answer: the next
    prompt of the session (`--resume`) finds the batch missing from the transcript and hands it on."""
    from alarms.handover import pending_file
    from alarms.mailbox import SessionMail

    alice, bob, plugin = following
    needle = f"KILLED-{uuid.uuid4().hex[:8]}"
    hold = tmp_path / "held-hook.pid"
    with FakeModel(slow_delay=0.4) as model:
        seed_claude_home(host_home, project)
        env = host_env(host_home, **claude_env(model.url))
        with held_hook(plugin, hold):  # the hook takes the mail, then holds until killed
            claude = host_procs.start(
                [host_bin / "claude", "-p", "SLOW_REPLY please", "--plugin-dir", plugin], cwd=project,
                env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            )
            model.wait_for("SLOW_REPLY", timeout=60)
            sid = wait_for(lambda: live_session(bob), 10, "the session")["sid"]
            alice.ok("send", "bob", f"during the turn: {needle}")
            pending = Path(pending_file(str(bob.home / "bob" / "spool" / "sessions"), sid))
            wait_for(hold.exists, 60, "the Stop hook to take the mail")
            # `take` has returned: the batch is recorded and the cursor moved; nothing is printed yet.
            assert pending.exists() and SessionMail(bob.home / "bob", sid).waiting() == 0
            older_than_the_margin(pending)  # what Claude Code writes after the kill is later
            hook = int(hold.read_text())
            assert hook in descendants(claude.pid)
            os.kill(hook, signal.SIGKILL)
            claude.communicate(timeout=90)
        assert not model.find(needle, system=True), model.summary()
        resumed = host_procs.run([host_bin / "claude", "-p", "--resume", sid, "carry on", "--plugin-dir",
                                  plugin], cwd=project, env=env, timeout=90)
        assert resumed.returncode == 0, resumed.stderr
        model.wait_for(needle, timeout=5, system=True)
        assert delivered_once(model, needle), model.summary()
        assert not pending.exists()  # the Stop hook of that turn found it in the transcript
        again = host_procs.run([host_bin / "claude", "-p", "--resume", sid, "anything else", "--plugin-dir",
                                plugin], cwd=project, env=env, timeout=90)
        assert again.returncode == 0, again.stderr
        assert delivered_once(model, needle), model.summary()
