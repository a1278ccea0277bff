"""talk's Copilot CLI extension: a plain `copilot` (the real one, pinned in tests/hosts/package.json)
with `talk install copilot`, against the fake model.

Copilot CLI 1.0.102 runs extensions only when its EXTENSIONS feature is on: the fixture turns it
on the way a user does, `"enabledFeatureFlags": {"EXTENSIONS": true}` in Copilot's settings.json,
and trusts the project in Copilot's config, so nobody touches the terminal before the mail. The
extension's door reaches the session over the extension's own stdio (no port): a just-started
session takes mail waiting for it, and mail arriving while it is idle, each as a turn of its own,
once, with the hooks beside it on the same cursor; mail that arrives while Copilot asks
permission for a command waits for the end of the turn; in an untrusted folder nothing runs until
the user answers; after /clear the new session takes the mail; in prompt mode the prompt's hook
brings it; uninstalling takes the extension out.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import Agent, wait_for
from tests.hosts.claude import spool_has
from tests.hosts.copilot import (
    TOOL_DONE,
    Rig,
    delivered,
    door_session,
    gated_model,
    in_session_spool,
    install,
    live_session,
    prompt_argv,
    roles,
    trusted_rig,
    uninstall,
)
from tests.hosts.fake_model import FakeModel
from tests.hosts.peer_mail import Receipt, bob_layout, copies_steady, handed_states, outbox_state, send
from tests.hosts.procs import ProcessGroup, descendants
from tests.hosts.roles import MAIL, arrives_as_claimed, arrives_whole
from tests.hosts.tmux import Tmux

PROMPT = "/ commands"  # on Copilot's screen once its input is ready


@pytest.fixture
def ext_rig(pair: tuple[Agent, Agent], host_bin: Path, host_home: Path, tmp_path: Path) -> Iterator[Rig]:
    """bob following alice, the project trusted and Copilot's extensions on in its own config."""
    extensions_on = {"enabledFeatureFlags": {"EXTENSIONS": True}}
    with trusted_rig(pair, host_bin, host_home, tmp_path, extensions_on) as rig:
        yield rig


def start(r: Rig, model: FakeModel, *args: str) -> Tmux:
    tmux = Tmux({**r.env_for(model), "TERM": "xterm-256color"}, "copilot-ext")
    tmux.start_shown(r.project, [str(r.copilot), *args], PROMPT, "Copilot's prompt")
    return tmux




def copilot_pid(r: Rig, tmux: Tmux) -> int:
    """The live session's registered process: Copilot itself, under the pane."""
    session = live_session(r.bob)
    assert session is not None
    pid, pane = int(session["pid"]), tmux.pane_pid()
    argv0 = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0]
    assert pane is not None and pid in descendants(pane) and Path(argv0.decode()).name == "copilot", pid
    return pid



@pytest.mark.hosts
def test_plain_copilot_takes_mail_waiting_and_mail_arriving_idle_without_a_keystroke_each_once(
    ext_rig: Rig, fake_model: FakeModel,
) -> None:
    r = ext_rig
    waiting, idle = (f"PEER-EXT-{what}-{uuid.uuid4().hex[:8]}" for what in ("WAITING", "IDLE"))
    first_id = send(r.alice, f"{waiting}: the build is green\n{MAIL}")
    install(r.env, r.project)
    tmux = start(r, fake_model)
    try:
        door_session(r)
        host = copilot_pid(r, tmux)
        seen = fake_model.wait_for(waiting, timeout=90)
        assert seen["n"] == 1 and first_id in seen["last_user_text"], fake_model.summary()
        assert roles(seen, waiting) == ["user"] and arrives_whole(seen), seen["body"].get("messages")
        arrives_as_claimed(seen, waiting, "`copilot` with extensions on", "enqueue")
        tmux.wait_shown(f"FAKE_OK [req {seen['n']}]", 60, "the end of that turn: the session is idle")
        second_id = send(r.alice, f"{idle}: are you there?")
        later = fake_model.wait_for(idle, timeout=90)
        assert roles(later, idle) == ["user"] and second_id in later["last_user_text"], fake_model.summary()
        tmux.wait_shown(f"FAKE_OK [req {later['n']}]", 60, "the end of that turn")
        tmux.type("and now?")  # the hooks run on the same cursor: nothing more to hand on
        fake_model.wait_for("and now?", timeout=60)
        assert copilot_pid(r, tmux) == host  # the hooks register the process the door registered
        assert fake_model.count(waiting) == 1 and fake_model.count(idle) == 1, fake_model.summary()
        assert copies_steady(fake_model, waiting) and copies_steady(fake_model, idle), fake_model.summary()
        wait_for(lambda: delivered(r, first_id) and delivered(r, second_id), 30,
                 "the door's `delivered`, from Copilot's event log")
        for msg_id in (first_id, second_id):
            assert handed_states(bob_layout(r.bob), msg_id) == [Receipt.WRITTEN, Receipt.DELIVERED]
        wait_for(lambda: outbox_state(r.alice, second_id) == "delivered", 60, "alice's `delivered` receipt")
    finally:
        tmux.kill()


@pytest.mark.hosts
def test_mail_waits_while_copilot_asks_permission_and_comes_after_the_turn(
    ext_rig: Rig, tmp_path: Path,
) -> None:
    """The extension alone (its hooks taken out): Copilot asks before running the command. Mail
    sent then would wait under the question and, once the user allowed the command, move it to
    the background: the door holds it until the turn is over, then starts a turn of its own."""
    r, gate = ext_rig, tmp_path / "gate"
    needle = f"PEER-EXT-ASKING-{uuid.uuid4().hex[:8]}"
    with gated_model(gate) as model:
        Path(install(r.env, r.project)["hooks_file"]).unlink()
        tmux = start(r, model)
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
            assert TOOL_DONE in model.requests[1]["trailing_text"], model.summary()  # ran in the foreground
            assert seen["n"] == 3 and needle in seen["last_user_text"], model.summary()  # a turn of its own
            assert roles(seen, needle) == ["user"] and model.count(needle) == 1, model.summary()
            wait_for(lambda: delivered(r, msg_id), 30, "the door's `delivered`, from Copilot's event log")
        finally:
            tmux.kill()


@pytest.mark.hosts
def test_uninstall_takes_the_extension_out(ext_rig: Rig) -> None:
    r = ext_rig
    done = install(r.env, r.project)
    folder = Path(done["extension_dir"])
    assert folder == r.copilot_home() / "extensions" / "talk"
    assert json.loads((folder / "talk.json").read_text())["talk_home"] == str(r.bob.home)
    assert (folder / "extension.mjs").is_file() and (folder / "extension.mjs").stat().st_mode & 0o022 == 0
    assert str(folder) in uninstall(r.env, r.project)["changed"]
    assert not folder.exists() and (r.copilot_home() / "settings.json").exists()  # the user's settings stay


@pytest.mark.hosts
def test_after_clear_the_new_session_takes_the_mail_and_the_old_one_is_retired(
    ext_rig: Rig, fake_model: FakeModel,
) -> None:
    """/clear stops the extension and starts it again for the new session: the old door retires
    its session, the new one registers and takes the mail."""
    r = ext_rig
    needle = f"PEER-EXT-CLEARED-{uuid.uuid4().hex[:8]}"
    install(r.env, r.project)
    tmux = start(r, fake_model)
    try:
        first = door_session(r)
        tmux.type("/clear")
        second = wait_for(lambda: (s := live_session(r.bob)) and s["sid"] != first and s["sid"], 60,
                          "the new session's registration, and only it")
        msg_id = send(r.alice, f"{needle}: after the clear")
        seen = fake_model.wait_for(needle, timeout=90)
        assert roles(seen, needle) == ["user"] and fake_model.count(needle) == 1, fake_model.summary()
        assert in_session_spool(r, second, needle) and not in_session_spool(r, first, needle)
        wait_for(lambda: delivered(r, msg_id), 30, "the door's `delivered`, from Copilot's event log")
    finally:
        tmux.kill()


@pytest.mark.hosts
def test_in_prompt_mode_the_door_stays_shut_and_the_prompt_brings_the_mail(
    ext_rig: Rig, fake_model: FakeModel, host_procs: ProcessGroup,
) -> None:
    """`copilot -p` loads the extension too: a turn of the door's own would run before the
    script's prompt and answer on its stdout, so the door leaves mail to the prompt's hook."""
    r = ext_rig
    needle = f"PEER-EXT-PROMPT-{uuid.uuid4().hex[:8]}"
    msg_id = send(r.alice, f"{needle}: the build is green")
    wait_for(lambda: spool_has(r.bob, needle), 30, "the follower to spool the mail")
    install(r.env, r.project)
    done = host_procs.run(prompt_argv(r.copilot, "hello copilot"), cwd=r.project, env=r.env_for(fake_model),
                          timeout=180)
    assert done.returncode == 0, done.stderr
    assert len(fake_model.requests) == 1, fake_model.summary()
    first = fake_model.requests[0]
    text = first["last_user_text"]
    assert needle in text and "hello copilot" in text, fake_model.summary()
    assert handed_states(bob_layout(r.bob), msg_id) == [Receipt.DELIVERED]  # the hook's, alone


@pytest.mark.hosts
def test_in_an_untrusted_folder_mail_waits_for_the_users_answer(ext_rig: Rig, fake_model: FakeModel) -> None:
    """Copilot starts extensions only once the folder is trusted: while its question is open no
    door is there, and no turn runs before the user said Copilot may read the folder."""
    r = ext_rig
    needle = f"PEER-EXT-TRUST-{uuid.uuid4().hex[:8]}"
    (r.copilot_home() / "config.json").write_text("{}")
    msg_id = send(r.alice, f"{needle}: the build is green")
    wait_for(lambda: spool_has(r.bob, needle), 30, "the follower to spool the mail")
    install(r.env, r.project)
    tmux = Tmux({**r.env_for(fake_model), "TERM": "xterm-256color"}, "copilot-ext")
    try:
        tmux.start_shown(r.project, [str(r.copilot)], "Do you trust the files", "the folder trust question")
        with pytest.raises(AssertionError):  # a door there would have sent by now (it takes ~0.1 s)
            fake_model.wait_for(needle, timeout=5)
        assert live_session(r.bob) is None and fake_model.requests == []
        tmux.keys("Enter")  # 1. Yes
        seen = fake_model.wait_for(needle, timeout=90)
        assert seen["n"] == 1 and roles(seen, needle) == ["user"] and fake_model.count(needle) == 1
        wait_for(lambda: delivered(r, msg_id), 30, "the door's `delivered`, from Copilot's event log")
    finally:
        tmux.kill()
