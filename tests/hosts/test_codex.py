"""The Codex alarm: the hook's decisions, `talk install codex`'s merge, and real Codex runs.

Fast tests run the hook script as a real process against a real spool folder. The `hosts`
tests drive the real `codex exec` / `codex app-server` (pinned, from npm) against the fake model
on loopback, with a real relay and bob's follower: the test passes when the fake model
receives alice's text, once.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from alarms import hook_runtime
from alarms.hook_runtime import env_from_args, should_register
from alarms.host_config import hook_command
from alarms.hosts.codex import hook as codex_hook
from alarms.hosts.codex.hook import output_for, parse_payload
from alarms.hosts.codex.install import (
    EVENTS,
    handler_for,
    hook_script,
    is_talk_handler,
    merge_hooks,
    trust_plan,
)
from alarms.mailbox import SessionMail
from spool_writer.cursor import CursorReader, lock_path
from spool_writer.layout import flocked
from spool_writer.peek import nothing_new
from spool_writer.record import SpoolRecord
from spool_writer.spool import Spool
from tests.conftest import wait_for
from tests.hosts.peer_mail import older_than_the_margin
from tests.hosts.roles import MAIL, arrives_as_claimed
from tests.hosts.talk_install import install_codex

PYTHON = sys.executable
HOOK = str(hook_script())


# --- pure decisions -------------------------------------------------------------------------

def test_payload_gives_event_and_session() -> None:
    raw = json.dumps({"session_id": "01a2-x", "hook_event_name": "Stop", "stop_hook_active": True})
    assert parse_payload(raw) == ("Stop", "01a2-x")
    for bad in ("[]", "{}", '{"session_id": "", "hook_event_name": "Stop"}', "not json"):
        with pytest.raises(ValueError):
            parse_payload(bad)


def test_output_per_event() -> None:
    assert output_for("Stop", "MAIL") == {"decision": "block", "reason": "MAIL"}
    for event in ("SessionStart", "UserPromptSubmit"):
        assert output_for(event, "MAIL") == {
            "hookSpecificOutput": {"hookEventName": event, "additionalContext": "MAIL"}}
    assert output_for("Stop", None) == {}  # nothing waits: Codex may stop, so Stop never loops
    assert output_for("PreToolUse", "MAIL") == {}


def test_registration_is_due_at_session_start_and_when_missing() -> None:
    assert should_register("SessionStart", registered=True)
    assert should_register("UserPromptSubmit", registered=False)
    assert should_register("Stop", registered=False)
    assert not should_register("UserPromptSubmit", registered=True)
    assert not should_register("Stop", registered=True)


def test_install_time_settings_override_the_env() -> None:
    env = env_from_args(["--talk-home", "/h", "--user", "bob"], {"TALK_HOME": "/other", "X": "1"})
    assert env == {"TALK_HOME": "/h", "TALK_USER": "bob", "X": "1"}
    assert env_from_args([], {"A": "b"}) == {"A": "b"}


def test_fast_identity_agrees_with_identity_folder(tmp_path: Path) -> None:
    from alarms.mailbox import NoIdentity, identity_folder

    home = tmp_path / "h"
    env = {"TALK_HOME": str(home), "HOME": str(tmp_path)}
    assert hook_runtime.fast_identity(env) is None  # no home: the full path explains
    (home / "bob").mkdir(parents=True)
    (home / "bob" / "identity.json").write_text("{}")
    assert hook_runtime.fast_identity(env) == str(identity_folder(env))
    (home / "carol").mkdir()
    (home / "carol" / "identity.json").write_text("{}")
    assert hook_runtime.fast_identity(env) is None
    with pytest.raises(NoIdentity):
        identity_folder(env)
    carol = {**env, "TALK_USER": "carol"}
    assert hook_runtime.fast_identity(carol) == str(identity_folder(carol))
    assert hook_runtime.fast_identity({**env, "TALK_USER": "dave"}) is None


# --- hooks.json merge -----------------------------------------------------------------------

FOREIGN = {"type": "command", "command": "/usr/bin/notify-me", "timeout": 5}


def test_merge_keeps_foreign_hooks_and_is_idempotent() -> None:
    doc: dict[str, Any] = {"other": 1, "hooks": {"Stop": [{"hooks": [FOREIGN]}],
                                                  "PreToolUse": [{"matcher": "x", "hooks": [FOREIGN]}]}}
    once = merge_hooks(doc, "/py -I -S /a/alarms/codex_hook.py")
    assert once["other"] == 1 and once["hooks"]["PreToolUse"] == doc["hooks"]["PreToolUse"]
    assert once["hooks"]["Stop"][0] == {"hooks": [FOREIGN]}  # untouched, and still first
    for event in EVENTS:
        ours = [h for g in once["hooks"][event] for h in g["hooks"] if is_talk_handler(h)]
        assert ours == [handler_for("/py -I -S /a/alarms/codex_hook.py")]
    assert merge_hooks(once, "/py -I -S /a/alarms/codex_hook.py") == once
    assert doc["hooks"]["Stop"] == [{"hooks": [FOREIGN]}]  # the input is not changed


def test_merge_replaces_an_older_talk_entry_in_place() -> None:
    old = {"type": "command", "command": "python3 /old/alarms/codex_hook.py", "timeout": 30}
    doc = {"hooks": {"Stop": [{"hooks": [old, FOREIGN]}, {"hooks": [dict(old)]}]}}
    merged = merge_hooks(doc, "/new/python -I -S /new/alarms/codex_hook.py")
    # same position (group 0, handler 0) keeps Codex's trust key; the duplicate and its group go
    assert merged["hooks"]["Stop"] == [{"hooks": [handler_for("/new/python -I -S /new/alarms/codex_hook.py"),
                                                  FOREIGN]}]


def test_merge_refuses_shapes_codex_would_refuse() -> None:
    with pytest.raises(ValueError):
        merge_hooks({"hooks": []}, "c")
    with pytest.raises(ValueError):
        merge_hooks({"hooks": {"Stop": {"hooks": []}}}, "c")


def test_hook_command_uses_the_interpreter_by_path_in_isolated_mode() -> None:
    cmd = hook_command("/v env/bin/python3", Path("/x/alarms/codex_hook.py"), "/t home", "bob")
    assert cmd == "'/v env/bin/python3' -I -S /x/alarms/codex_hook.py --talk-home '/t home' --user bob"
    assert hook_command("/p", Path("/h.py"), None, None) == "/p -I -S /h.py"


def test_trust_plan_picks_only_talks_hooks_in_that_file(tmp_path: Path) -> None:
    hooks_file = tmp_path / "hooks.json"

    def hook(key: str, command: str, status: str, source: Path = hooks_file) -> dict[str, Any]:
        return {"key": key, "command": command, "currentHash": f"sha256:{key}", "trustStatus": status,
                "sourcePath": str(source)}

    elsewhere = hook("d", "C", "untrusted", tmp_path / "x")
    listed = {"data": [{"hooks": [hook("a", "C", "untrusted"), hook("b", "C", "trusted"),
                                  hook("c", "other", "untrusted"), elsewhere]},
                       {"hooks": [hook("a", "C", "untrusted")]}]}
    keys, edits = trust_plan(listed, hooks_file, "C")
    assert keys == ["a", "b"]
    assert edits == [{"keyPath": 'hooks.state."a".trusted_hash', "value": "sha256:a",
                      "mergeStrategy": "upsert"}]


# --- the hook as a process, on a real spool ---------------------------------------------------

def record(text: str) -> SpoolRecord:
    return {"id": uuid.uuid4().hex, "from": "a" * 32, "name": "alice", "text": text,
            "ts": "2026-11-29T15:00:00Z", "kind": "chat"}


def run_hook(folder: Path, event: str, sid: str, **popen: Any) -> dict[str, Any]:
    payload = json.dumps({"session_id": sid, "hook_event_name": event, "cwd": str(folder)})
    p = subprocess.run([PYTHON, "-I", "-S", HOOK, "--talk-home", str(folder.parent)], input=payload,
                       capture_output=True, text=True, timeout=30, **popen)
    assert p.returncode == 0 and p.stderr == "", p.stderr
    out: dict[str, Any] = json.loads(p.stdout)
    return out


def test_session_start_registers_takes_the_inbox_and_hands_it_on(folder: Path) -> None:
    spool = Spool(folder / "spool")
    msg = record("waiting since before the session")
    spool.deliver(msg)  # no session yet: the inbox
    out = run_hook(folder, "SessionStart", "s1")
    context = out["hookSpecificOutput"]["additionalContext"]
    assert out["hookSpecificOutput"]["hookEventName"] == "SessionStart"
    assert msg["text"] in context and msg["id"] in context and "grant" in context
    assert "only as a developer message" in context  # how Codex shows added context
    sessions = json.loads((folder / "spool" / "sessions.json").read_text())["sessions"]
    assert sessions["s1"]["host"] == "codex" and sessions["s1"]["pid"] == os.getpid()  # the hook's parent
    assert run_hook(folder, "UserPromptSubmit", "s1") == {}  # handed on once


def test_stop_blocks_once_then_lets_codex_stop(folder: Path) -> None:
    run_hook(folder, "SessionStart", "s2")
    msgs = [record("first"), record("second\nline")]
    for m in msgs:
        Spool(folder / "spool").deliver(m)
    out = run_hook(folder, "Stop", "s2")
    assert out["decision"] == "block"
    assert "2 new messages" in out["reason"] and "> second\n> line" in out["reason"]
    assert "NOTE: your host" not in out["reason"]  # the next turn's input: nothing to warn of
    assert run_hook(folder, "Stop", "s2") == {}


def test_user_prompt_registers_a_session_that_missed_session_start(folder: Path) -> None:
    Spool(folder / "spool").deliver(m := record("for whoever comes"))
    out = run_hook(folder, "UserPromptSubmit", "late")
    assert m["text"] in out["hookSpecificOutput"]["additionalContext"]


def test_a_broken_setup_prints_empty_output_and_logs(tmp_path: Path, folder: Path) -> None:
    p = subprocess.run([PYTHON, "-I", "-S", HOOK, "--talk-home", str(tmp_path / "nowhere")],
                       input='{"session_id":"s","hook_event_name":"Stop"}', capture_output=True, text=True,
                       timeout=30)
    assert (p.returncode, p.stdout.strip(), p.stderr) == (0, "{}", "")
    assert run_hook(folder, "Stop", "bad/../sid") == {}
    garbage = subprocess.run([PYTHON, "-I", "-S", HOOK, "--talk-home", str(folder.parent)], input="{oops",
                             capture_output=True, text=True, timeout=30)
    assert (garbage.returncode, garbage.stdout.strip()) == (0, "{}")
    log = (folder / codex_hook.LOG_NAME).read_text().splitlines()
    assert any("bad/../sid" in line for line in log) and any("JSONDecodeError" in line for line in log)


# --- at most once: a hook killed while handing mail on ------------------------------------------

def _hook_proc(folder: Path, sid: str, stdout: Any) -> subprocess.Popen[bytes]:
    payload = json.dumps({"session_id": sid, "hook_event_name": "Stop"}).encode()
    proc = subprocess.Popen([PYTHON, "-I", "-S", HOOK, "--talk-home", str(folder.parent)],
                            stdin=subprocess.PIPE, stdout=stdout, stderr=subprocess.DEVNULL)
    assert proc.stdin is not None
    proc.stdin.write(payload)
    proc.stdin.close()
    return proc


def test_killed_before_the_cursor_moves_the_mail_comes_next_time(folder: Path) -> None:
    mail = SessionMail(folder, "k1")
    mail.register("codex", os.getpid())
    Spool(folder / "spool").deliver(m := record("survives a kill"))
    with flocked(lock_path(mail.layout.cursor_file("k1"))):  # the hook blocks on the cursor lock
        proc = _hook_proc(folder, "k1", subprocess.DEVNULL)
        time.sleep(0.5)
        assert proc.poll() is None
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    assert mail.waiting() == 1
    assert m["text"] in run_hook(folder, "Stop", "k1")["reason"]


def test_killed_after_the_cursor_moved_the_mail_is_not_handed_on_twice(folder: Path) -> None:
    """The documented at-most-once window: the cursor is saved before the hook prints (DESIGN.md,
    Alarms), so a hook killed while printing loses that hand-over; it never repeats it, which a
    Stop hook must not (Codex would block every turn). The text stays in the spool for `talk log`."""
    mail = SessionMail(folder, "k2")
    mail.register("codex", os.getpid())
    Spool(folder / "spool").deliver(m := record("taken, then the hook died"))
    read_end, write_end = os.pipe()
    os.set_blocking(write_end, False)
    try:
        while True:  # fill the pipe: the hook's print will block, after take() has returned
            try:
                os.write(write_end, b"x" * 65536)
            except BlockingIOError:
                break
        os.set_blocking(write_end, True)
        proc = _hook_proc(folder, "k2", write_end)
        cursor = mail.layout.cursor_file("k2")
        moved = lambda: cursor.exists() and json.loads(cursor.read_text())["offset"] > 0  # noqa: E731
        wait_for(moved, 10, "the cursor to move")
        time.sleep(0.2)
        assert proc.poll() is None  # stuck writing its answer
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    finally:
        os.close(read_end)
        os.close(write_end)
    assert mail.waiting() == 0
    assert run_hook(folder, "Stop", "k2") == {}
    assert m["id"] in mail.layout.session_file("k2").read_text()
    assert CursorReader(mail.layout.session_file("k2"), mail.layout.cursor_file("k2")).take() == []


# --- real Codex -------------------------------------------------------------------------------


def spool_has(folder: Path, msg_id: str, name: str | None = None) -> bool:
    root = folder / "spool"
    files = [root / name] if name else [*root.glob("inbox.ndjson*"), *root.glob("sessions/*.ndjson*")]
    return any(p.exists() and msg_id in p.read_text() for p in files)


def codex_session(agent: Any) -> dict[str, Any]:
    live = [s for s in agent.ok("session", "list", "--json").json() if s["host"] == "codex" and s["alive"]]
    assert len(live) == 1, live
    session: dict[str, Any] = live[0]
    return session


@pytest.fixture
def codex_setup(pair: Any, host_bin: Path, host_home: Path, tmp_path: Path) -> Iterator[dict[str, Any]]:
    """bob's follower, a throwaway CODEX_HOME pointing at a fake model, talk's hooks installed by
    `talk install codex` (trust recorded through the app-server, no bypass flag)."""
    from tests.hosts.configs import codex_env
    from tests.hosts.npm import host_env

    alice, bob = pair
    bob.ok("follow", "--peer", "alice")
    codex_home = host_home / ".codex"
    project = tmp_path / "project"
    project.mkdir()
    env = host_env(host_home, **codex_env(codex_home), TALK_HOME=str(bob.home))
    try:
        yield {"alice": alice, "bob": bob, "codex_home": codex_home, "project": project, "env": env,
               "codex": host_bin / "codex", "folder": bob.home / "bob"}
    finally:
        bob.run("stop")


def install_into(setup: dict[str, Any], model_url: str) -> dict[str, Any]:
    from tests.hosts.configs import write_codex_config

    write_codex_config(setup["codex_home"], model_url)
    args = ["--codex-home", str(setup["codex_home"]), "--codex-bin", str(setup["codex"]), "--json"]
    r = install_codex(args, setup["env"], setup["project"])
    assert r.returncode == 0, r.stderr
    out: dict[str, Any] = json.loads(r.stdout)
    assert len(out["trusted"]) == len(EVENTS) and out["hooks_file"] == str(setup["codex_home"] / "hooks.json")
    return out


@pytest.mark.hosts
def test_install_is_idempotent_and_keeps_trust(codex_setup: dict[str, Any], fake_model: Any) -> None:
    first = install_into(codex_setup, fake_model.url)
    hooks_file = Path(first["hooks_file"])
    before = hooks_file.read_text()
    again = install_into(codex_setup, fake_model.url)
    assert again["trusted"] == first["trusted"] and hooks_file.read_text() == before
    config = (codex_setup["codex_home"] / "config.toml").read_text()
    assert all(f'[hooks.state."{key}"]' in config for key in first["trusted"])
    assert '[model_providers.fake]' in config  # Codex's own edit kept the rest


@pytest.mark.hosts
def test_install_without_codex_writes_hooks_and_says_trust_is_missing(codex_setup: dict[str, Any]) -> None:
    env = {**codex_setup["env"], "PATH": "/nonexistent"}
    r = install_codex(["--codex-home", str(codex_setup["codex_home"]), "--json"], env, codex_setup["project"])
    assert r.returncode == 1 and "NOT trusted" in r.stderr and "/hooks" in r.stderr
    assert json.loads(r.stdout)["trusted"] == []
    assert (codex_setup["codex_home"] / "hooks.json").exists()


@pytest.mark.hosts
def test_mail_waiting_before_the_session_reaches_the_model_once(
    codex_setup: dict[str, Any], fake_model: Any, host_procs: Any,
) -> None:
    s = codex_setup
    text = f"PEER-BEFORE-START: the build is green\n{MAIL}"
    msg_id = s["alice"].ok("send", "bob", text, "--json").json()["id"]
    wait_for(lambda: spool_has(s["folder"], msg_id, "inbox.ndjson"), 15, "the follower to spool the mail")
    install_into(s, fake_model.url)
    r = host_procs.run([s["codex"], "exec", "--skip-git-repo-check", "hello codex"], cwd=s["project"],
                       env=s["env"], timeout=120)
    assert r.returncode == 0, r.stderr
    seen = [req for req in fake_model.requests if any(msg_id in t for t in req["system_texts"])]
    assert seen, fake_model.summary()
    first = seen[0]
    assert sum(t.count("PEER-BEFORE-START") for t in first["system_texts"] + first["texts"]) == 1
    assert fake_model.count("PEER-BEFORE-START") == 0  # added context, not a user turn
    assert "hello codex" in first["last_user_text"]
    arrives_as_claimed(first, "PEER-BEFORE-START", "Codex", "SessionStart")
    assert not spool_has(s["folder"], msg_id, "inbox.ndjson")  # the session took the inbox over
    # The hook logged its hand-over: bob's follower tells alice, whose receive takes the receipt.
    alice = s["alice"]
    wait_for(lambda: alice.ok("receive").out == "" and
          alice.ok("status", msg_id, "--json").json()["state"] == "delivered", 15, "the delivered receipt")


@pytest.mark.hosts
def test_mail_during_a_turn_makes_stop_run_one_more_turn(
    codex_setup: dict[str, Any], host_procs: Any, tmp_path: Path,
) -> None:
    from tests.hosts.fake_model import FakeModel

    s = codex_setup
    with FakeModel(slow_delay=0.6) as model:
        install_into(s, model.url)
        log = tmp_path / "codex.log"
        proc = host_procs.start([s["codex"], "exec", "--skip-git-repo-check", "work on it SLOW_REPLY"],
                                cwd=s["project"], env=s["env"], stdout=log, stderr=log)
        model.wait_for("SLOW_REPLY", timeout=60)
        sid = codex_session(s["bob"])["sid"]
        msg_id = s["alice"].ok("send", "bob", f"PEER-MID-TURN: please rebase\n{MAIL}", "--json").json()["id"]
        wait_for(lambda: spool_has(s["folder"], msg_id, f"sessions/{sid}.ndjson"), 15, "the session's spool")
        assert len(model.requests) == 1  # still streaming the first turn
        assert proc.wait(timeout=120) == 0, log.read_text()
        assert model.count("PEER-MID-TURN") == 1, model.summary()
        requests = model.requests
        assert len(requests) == 2, model.summary()  # one more turn, then the second Stop let it end
        assert "<hook_prompt" in requests[1]["last_user_text"] and msg_id in requests[1]["last_user_text"]
        assert "PEER-MID-TURN" not in json.dumps(requests[0]["body"])
        arrives_as_claimed(requests[1], "PEER-MID-TURN", "Codex", "Stop")
        assert SessionMail(s["folder"], sid).waiting() == 0


# --- exactly once: pending batches reconciled against the transcript -----------------------------

def _batch(ids: tuple[str, ...], at: float = 100.0, mark: int = 0) -> Any:
    from alarms.handover import PendingBatch

    return PendingBatch(ids, at, 4242, 1, "/t.jsonl", mark)


def test_reconcile_decision() -> None:
    from alarms.handover import DELIVERED, LOST, MARGIN_S, WAIT, Seen, judge, missing

    batch = _batch(("m1", "m2"))
    later = 100.0 + MARGIN_S + 0.1
    assert judge(batch, Seen(frozenset({"m1", "m2"}), later), taker_alive=True) == DELIVERED
    assert judge(batch, Seen(frozenset({"m1", "m2"}), 100.0), taker_alive=False) == DELIVERED
    # not (all) there: a live taker may still be printing; a dead one's host must have moved on
    assert judge(batch, Seen(frozenset({"m1"}), later), taker_alive=True) == WAIT
    assert judge(batch, Seen(frozenset(), 100.0 + MARGIN_S / 2), taker_alive=False) == WAIT
    assert judge(batch, Seen(frozenset({"m1"}), later), taker_alive=False) == LOST
    assert missing(batch, Seen(frozenset({"m1"}), later)) == ["m2"]
    assert judge(batch, None, taker_alive=False) == WAIT  # no transcript: nothing to judge by


def test_look_finds_markers_only_after_the_batchs_mark(tmp_path: Path) -> None:
    from alarms.handover import PendingBatch, look

    t = tmp_path / "t.jsonl"
    t.write_text('{"old": "id m1, seen before"}\n')
    mark = t.stat().st_size
    t.write_text(t.read_text() + '{"text": "message 1 of 1 from alice (fingerprint f, id m2, sent x)"}\n')
    before = PendingBatch(("m1", "m2"), 1.0, 1, None, str(t), mark)
    unknown = PendingBatch(("m1",), 1.0, 1, None, None, 0)  # a monitor's batch: the whole file counts
    seen = look([before, unknown], str(t))
    assert seen is not None
    assert seen[0].found == frozenset({"m2"}) and seen[1].found == frozenset({"m1"})
    assert look([before], str(tmp_path / "absent")) is None


def test_pending_take_redelivers_a_lost_batch_once(folder: Path, tmp_path: Path) -> None:
    """A batch taken by a process that is gone, missing from a transcript written since: again, once."""
    from alarms import handover

    mail = SessionMail(folder, "p1")
    mail.register("codex", os.getpid())
    Spool(folder / "spool").deliver(m := record("lost once"))
    transcript = tmp_path / "rollout.jsonl"
    transcript.write_text("{}\n")
    assert [r["id"] for r in handover.take(mail.layout, "p1", str(transcript), record=True)] == [m["id"]]
    path = Path(handover.pending_file(str(mail.layout.sessions_dir), "p1"))
    (batch,) = handover.load(path)
    assert batch.ids == (m["id"],) and batch.pid == os.getpid()
    assert handover.take(mail.layout, "p1", str(transcript), record=True) == []  # the taker lives: wait
    dead = subprocess.run([PYTHON, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    old = handover.PendingBatch(batch.ids, batch.at - 10, int(dead.stdout), None, str(transcript), 0)
    handover.save(path, [old])
    again = handover.take(mail.layout, "p1", str(transcript), record=True)
    assert [r["id"] for r in again] == [m["id"]] and again[0]["text"] == "lost once"
    transcript.write_text(f'{{"hook": "id {m["id"]}, sent"}}\n')  # this time Codex wrote it down
    assert handover.take(mail.layout, "p1", str(transcript), record=True) == [] and not path.exists()
    assert nothing_new(folder, "p1")  # and the fast path is back


HELD_HOOK = Path(__file__).resolve().parent / "held_hook.py"
# What `talk install codex` does, for another command: swap it in for talk's hook, have Codex trust it.
TRUST_COMMAND = """
import json, sys
from pathlib import Path
from alarms.host_config import write_config
from alarms.hosts.codex.install import merged_hooks_file, record_trust
codex, home, command = sys.argv[1], Path(sys.argv[2]), sys.argv[3]
write_config(home / "hooks.json", merged_hooks_file(home / "hooks.json", command))
print(json.dumps(record_trust(codex, home, home / "hooks.json", command)))
"""


def install_held(setup: dict[str, Any], model_url: str, hold: Path) -> None:
    """`install_into`, then talk's hook command run through tests/hosts/held_hook.py instead: the
    same hook, held once it has taken mail (its pid in `hold`). `install_into` puts it back."""
    python, *flags_and_args = shlex.split(install_into(setup, model_url)["command"])
    # The installed hook: the repository's under an editable install, site-packages' otherwise.
    assert flags_and_args[:2] == ["-I", "-S"] and flags_and_args[2].endswith("codex_hook.py"), flags_and_args
    held = shlex.join([python, "-I", "-S", str(HELD_HOOK), str(hold), *flags_and_args[2:]])
    r = subprocess.run([PYTHON, "-c", TRUST_COMMAND, str(setup["codex"]), str(setup["codex_home"]), held],
                       env=setup["env"], cwd=setup["project"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert len(json.loads(r.stdout)) == len(EVENTS), r.stdout  # one trusted key per hook event


@pytest.mark.hosts
def test_stop_hook_killed_after_taking_mail_hands_it_on_next_run_exactly_once(
    codex_setup: dict[str, Any], host_procs: Any, tmp_path: Path,
) -> None:
    """SIGKILL between the cursor's move and Codex reading the Stop hook's answer: the next run of
    the session (a resume) finds the batch missing from the rollout and hands it on, once."""
    from alarms.handover import pending_file
    from tests.hosts.fake_model import FakeModel
    from tests.hosts.procs import descendants

    s = codex_setup
    hold = tmp_path / "held-hook.pid"
    with FakeModel(slow_delay=0.6) as model:
        install_held(s, model.url, hold)  # the hook takes the mail, then holds until killed
        log = tmp_path / "codex.log"
        proc = host_procs.start([s["codex"], "exec", "--skip-git-repo-check", "work on it SLOW_REPLY"],
                                cwd=s["project"], env=s["env"], stdout=log, stderr=log)
        model.wait_for("SLOW_REPLY", timeout=60)
        sid = codex_session(s["bob"])["sid"]
        msg_id = s["alice"].ok("send", "bob", "PEER-KILLED-HOOK: rebase again", "--json").json()["id"]
        pending = Path(pending_file(str(s["folder"] / "spool" / "sessions"), sid))
        wait_for(hold.exists, 60, "the Stop hook to take the mail")
        # `take` has returned: the batch is recorded and the cursor moved; nothing is printed yet.
        assert pending.exists() and SessionMail(s["folder"], sid).waiting() == 0
        older_than_the_margin(pending)  # what Codex writes after the kill is later
        hook = int(hold.read_text())
        assert hook in descendants(proc.pid)
        os.kill(hook, signal.SIGKILL)
        proc.wait(timeout=120)
        assert model.count("PEER-KILLED-HOOK") == 0 and not model.find(msg_id, system=True), model.summary()
        install_into(s, model.url)  # talk's own hook for the next runs
        resumed = host_procs.run([s["codex"], "exec", "resume", "--skip-git-repo-check", sid, "carry on"],
                                 cwd=s["project"], env=s["env"], timeout=120)
        assert resumed.returncode == 0, resumed.stderr
        carried = [sum(t.count(msg_id) for t in r["texts"] + r["system_texts"]) for r in model.requests]
        assert any(carried), model.summary()
        first = next(i for i, c in enumerate(carried) if c)
        assert carried[first:] == [1] * (len(carried) - first), (carried, model.summary())
        assert model.count("PEER-KILLED-HOOK") <= 1
        assert not pending.exists()  # the next hook run saw it in the rollout and forgot it
        again = host_procs.run([s["codex"], "exec", "resume", "--skip-git-repo-check", sid, "anything else"],
                               cwd=s["project"], env=s["env"], timeout=120)
        assert again.returncode == 0, again.stderr
        last = model.requests[-1]
        assert sum(t.count(msg_id) for t in last["texts"] + last["system_texts"]) == 1  # not added again
