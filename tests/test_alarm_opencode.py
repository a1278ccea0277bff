"""The opencode alarm: its pure parts, its outbox over a real spool, and a real `opencode serve`.

The real-host tests (`-m hosts`) run opencode 1.18.33 against the fake model on loopback, with
a real relay, bob's follower and the alarm daemon, and check that every message alice sends
becomes exactly one new user turn for the model.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import re
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from alarms.opencode import RETRY, choose_pid, is_loopback
from alarms.opencode_api import OpencodeClient, OpencodeDown, split_url
from alarms.opencode_outbox import (
    Prompt,
    PromptOutbox,
    PromptOutboxState,
    accepted,
    fresh,
    new_prompt,
    opencode_id,
)
from alarms.opencode_status import AlarmFiles, AlarmStatus, alarm_status, render_alarm, running_pid
from alarms.procnet import listening_inodes, pid_listening_on
from durable.errors import UserError
from spool_writer import lines
from spool_writer.cursor import CursorReader
from spool_writer.layout import SpoolLayout
from spool_writer.record import SpoolRecord
from spool_writer.sessions import register
from tests.conftest import TALK, Agent, free_port
from tests.hosts.configs import write_opencode_config
from tests.hosts.fake_model import FakeModel
from tests.hosts.npm import host_env
from tests.hosts.opencode import http_json
from tests.hosts.procs import ProcessGroup, kill_tree

ROOT = Path(__file__).resolve().parent.parent
ID_SHAPE = re.compile(r"^(msg|prt)_[0-9a-f]{12}[0-9A-Za-z]{14}$")


def record(msg_id: str, text: str = "hi") -> SpoolRecord:
    return {"id": msg_id, "from": "f" * 32, "name": "alice", "text": text,
            "ts": "2026-01-01T00:00:00Z", "kind": "chat"}


# --- pure parts -----------------------------------------------------------------------------


def test_ids_have_opencodes_shape_sort_by_time_and_repeat_for_the_same_batch() -> None:
    a = opencode_id("msg", 1_795_965_366_037, 0, "id1")
    later = opencode_id("msg", 1_795_965_366_038, 0, "id1")
    assert ID_SHAPE.match(a) and ID_SHAPE.match(opencode_id("prt", 1, 1, "x"))
    assert a < later  # opencode orders a session's messages by id
    assert a == opencode_id("msg", 1_795_965_366_037, 0, "id1")
    assert a != opencode_id("msg", 1_795_965_366_037, 0, "id2")


def test_a_batch_is_one_prompt_with_fixed_message_and_part_ids() -> None:
    batch = new_prompt([record("a"), record("b")], "FRAMED", 1_795_965_366_037)
    body = batch.body()
    assert body == {"messageID": batch.message_id,
                    "parts": [{"id": batch.part_id, "type": "text", "text": "FRAMED"}]}
    assert batch.ids == ("a", "b")
    assert Prompt.from_json(json.loads(json.dumps(batch.to_json()))) == batch


def test_fresh_drops_what_is_pending_or_accepted_and_accepted_moves_pending_to_recent() -> None:
    pending = new_prompt([record("b")], "t", 1)
    state = PromptOutboxState(pending, ("a",), 3)
    assert [r["id"] for r in fresh([record("a"), record("b"), record("c")], state)] == ["c"]
    done = accepted(state, keep=2)
    assert done == PromptOutboxState(None, ("a", "b"), 4)
    unchanged = PromptOutboxState(None, ("a", "b", "c"), 0)
    assert accepted(unchanged, keep=2) == unchanged
    assert PromptOutboxState.from_json(json.loads(json.dumps(state.to_json()))) == state


def test_backoff_grows_with_jitter_and_is_capped() -> None:
    assert 0.25 <= RETRY.delay(1, lambda: 0.0) <= RETRY.delay(1, lambda: 1.0) == 0.5
    assert RETRY.delay(3, lambda: 0.0) == 1.0
    assert RETRY.delay(50, lambda: 1.0) == 5.0 and RETRY.delay(50, lambda: 0.0) == 2.5


def test_the_session_lives_with_the_given_pid_else_the_server_else_the_alarm() -> None:
    assert choose_pid(11, True, 22, 33) == 11
    assert choose_pid(11, False, 22, 33) == 22
    assert choose_pid(None, False, None, 33) == 33
    assert is_loopback("127.0.0.1") and is_loopback("localhost") and not is_loopback("10.0.0.2")


TCP_TABLE = """\
  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:1000 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 5897 1 0
   1: 0100007F:1000 0100007F:D2A4 01 00000000:00000000 00:00000000 00000000  1000        0 7777 1 0
   2: 00000000:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 4242 1 0
"""


def test_listening_inodes_finds_only_the_listening_socket_of_the_port() -> None:
    assert listening_inodes(TCP_TABLE, 4096) == {5897}  # not the established connection 7777
    assert listening_inodes(TCP_TABLE, 8080) == {4242}
    assert listening_inodes(TCP_TABLE, 9) == set()


def test_pid_listening_on_finds_this_process_listening() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        assert pid_listening_on(s.getsockname()[1]) == os.getpid()
    assert pid_listening_on(free_port()) is None


def test_split_url_and_a_closed_port_is_down() -> None:
    assert split_url("http://127.0.0.1:4096/") == ("127.0.0.1", 4096, "")
    with pytest.raises(ValueError, match="opencode server"):
        split_url("localhost:4096")
    with pytest.raises(OpencodeDown, match="did not answer"):
        OpencodeClient(f"http://127.0.0.1:{free_port()}", timeout=2).create_session()


# --- the outbox over a real spool -----------------------------------------------------------


@pytest.fixture
def spool(tmp_path: Path) -> Iterator[tuple[SpoolLayout, CursorReader]]:
    layout = SpoolLayout(tmp_path / "spool")
    register(layout.root, "opencode", "ses_test", os.getpid())
    yield layout, CursorReader(layout.session_file("ses_test"), layout.cursor_file("ses_test"))


def append(layout: SpoolLayout, *ids: str) -> None:
    with layout.session_file("ses_test").open("ab") as f:
        for i in ids:
            f.write(lines.encode(record(i, f"text {i}")))


def test_fill_moves_new_mail_into_the_outbox_and_the_cursor_past_it(
    tmp_path: Path, spool: tuple[SpoolLayout, CursorReader]
) -> None:
    layout, reader = spool
    outbox = PromptOutbox(tmp_path / "outbox.json")
    assert outbox.fill(reader, lambda rs: new_prompt(rs, "x", 1)).pending is None
    append(layout, "a", "b")
    state = outbox.fill(reader, lambda rs: new_prompt(rs, "|".join(r["text"] for r in rs), 1))
    assert state.pending is not None and state.pending.ids == ("a", "b")
    assert state.pending.text == "text a|text b"
    assert outbox.load() == state  # on disk before the cursor moved
    assert reader.count_unread() == 0


def test_a_crash_between_outbox_and_cursor_save_does_not_hand_mail_on_twice(
    tmp_path: Path, spool: tuple[SpoolLayout, CursorReader]
) -> None:
    """The outbox holds a batch whose cursor move was lost: the batch is kept, the reread dropped."""
    layout, reader = spool
    append(layout, "a", "b")
    outbox = PromptOutbox(tmp_path / "outbox.json")
    crashed = PromptOutboxState(new_prompt([record("a"), record("b")], "x", 1))
    outbox.save(crashed)  # as if the process died before the cursor was saved
    assert reader.count_unread() == 2
    outbox.save(accepted(crashed))  # the restarted alarm delivered the pending batch
    append(layout, "c")
    state = outbox.fill(reader, lambda rs: new_prompt(rs, "x", 2))
    assert state.pending is not None and state.pending.ids == ("c",)
    assert reader.count_unread() == 0


def test_alarm_status_reports_a_dead_alarm_as_stopped_with_its_outbox(tmp_path: Path) -> None:
    assert alarm_status(tmp_path) == []
    files = AlarmFiles(tmp_path, "ses_x")
    AlarmStatus(pid=123, url="http://127.0.0.1:1", session="ses_x", state="delivering").save(files.status)
    PromptOutbox(files.outbox).save(PromptOutboxState(new_prompt([record("a")], "x", 1)))
    [row] = alarm_status(tmp_path)
    assert row["running"] is False and row["state"] == "stopped" and row["outbox"] == 1
    assert row["session"] == "ses_x" and row["host"] == "opencode"
    assert running_pid(tmp_path, "ses_x") is None
    assert "not running (1 message(s) in its outbox); start it with `talk alarm opencode --url " \
        "http://127.0.0.1:1 --session ses_x`" in render_alarm(row)


def test_a_damaged_outbox_says_what_to_do(tmp_path: Path) -> None:
    (tmp_path / "outbox.json").write_text('{"pending": {"text": 1}}')
    with pytest.raises(UserError, match="move it aside"):
        PromptOutbox(tmp_path / "outbox.json").load()


# --- real host: opencode serve, the fake model, a relay, bob's follower, the alarm ------------

WARM_S = 60.0  # the first turn of a fresh opencode instance boots it (2-4 s; more on a busy machine)


def alarm_run(agent: Agent, *args: str) -> subprocess.CompletedProcess[str]:
    """`talk alarm ARGS --json`, the real command."""
    return subprocess.run([TALK, "alarm", *args, "--json"], capture_output=True,
                          text=True, env=agent.env(), cwd=ROOT, timeout=60)


def alarm(agent: Agent, *args: str) -> dict[str, Any]:
    p = alarm_run(agent, *args)
    assert p.returncode == 0, f"talk alarm {' '.join(args)} exited {p.returncode}: {p.stderr}"
    out: dict[str, Any] = json.loads(p.stdout)
    return out


def test_without_opencode_the_alarm_says_what_to_do_and_waits_keeping_the_mail(bob: Agent) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    p = alarm_run(bob, "opencode", "--url", url)
    assert p.returncode == 1 and "start `opencode serve` there, or pass --session" in p.stderr
    started = alarm(bob, "opencode", "--url", url, "--session", "ses_later")
    folder = bob.home / "bob"
    try:
        assert started["started"] is True and running_pid(folder, "ses_later") == started["pid"]
        wait_for(lambda: any(r["state"] == "waiting for opencode" for r in alarm_status(folder)), 10,
                 "the alarm to report opencode down")
        [row] = alarm_status(folder)
        assert "did not answer" in row["last_error"] and "mail is kept" in row["last_error"]
        assert alarm(bob, "opencode", "--url", url, "--session", "ses_later")["started"] is False
        assert alarm(bob, "stop", "opencode")["stopped"] == [{"session": "ses_later", "pid": started["pid"]}]
        assert alarm_status(folder)[0]["running"] is False
    finally:
        _kill(int(started["pid"]))


@dataclass
class OpencodeServer:
    """`opencode serve` on a fixed port, so a restart comes back at the same URL."""

    group: ProcessGroup
    bin_dir: Path
    project: Path
    env: dict[str, str]
    logs: Path
    port: int
    proc: subprocess.Popen[str] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        self.logs.mkdir(parents=True, exist_ok=True)
        out = self.logs / "opencode.out"
        offset = out.stat().st_size if out.exists() else 0
        self.proc = self.group.start(
            [self.bin_dir / "opencode", "serve", "--port", str(self.port), "--hostname", "127.0.0.1",
             "--print-logs", "--log-level", "INFO"],
            cwd=self.project, env=self.env, stdout=out, stderr=self.logs / "opencode.err")
        deadline = time.monotonic() + 60
        while f"listening on {self.url}" not in out.read_text(errors="replace")[offset:]:
            err = (self.logs / "opencode.err").read_text(errors="replace")[-2000:]
            assert self.proc.poll() is None, f"opencode exited: {err}"
            assert time.monotonic() < deadline, "opencode serve did not listen within 60 s"
            time.sleep(0.05)

    def stop(self) -> None:
        assert self.proc is not None
        kill_tree(self.proc.pid)
        self.proc.wait()

    def user_texts(self, sid: str) -> list[str]:
        """Every user message of the session, its text parts joined: what opencode stored."""
        messages = http_json("GET", f"{self.url}/session/{sid}/message", timeout=10)
        return ["\n".join(p.get("text", "") for p in m["parts"] if p["type"] == "text")
                for m in messages if m["info"]["role"] == "user"]


@dataclass
class Rig:
    alice: Agent
    bob: Agent
    model: FakeModel
    opencode: OpencodeServer
    sid: str
    alarm_pids: list[int]

    @property
    def spool_root(self) -> Path:
        return self.bob.home / "bob" / "spool"

    def send(self, text: str) -> None:
        self.alice.ok("send", "bob", text)

    def spooled(self, text: str) -> bool:
        return any(text in p.read_text(errors="replace") for p in self.spool_root.rglob("*.ndjson*"))

    def start_alarm(self) -> int:
        pid = int(alarm(self.bob, "opencode", "--url", self.opencode.url, "--session", self.sid)["pid"])
        self.alarm_pids.append(pid)
        return pid

    def delivered_once(self, text: str) -> None:
        """The model got `text` as new input once, and opencode stored it in one user message."""
        assert self.model.count(text) == 1, self.model.summary()
        assert sum(t.count(text) for t in self.opencode.user_texts(self.sid)) == 1


def wait_for(check: Callable[[], bool], timeout: float, what: str, step: float = 0.02) -> float:
    """Poll until check() holds; returns the time it first held (time.time())."""
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(step)
    return time.time()


def marker(label: str) -> str:
    return f"{label}-{random.randrange(16**8):08x}"


def _kill(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)


@pytest.fixture
def rig(
    pair: tuple[Agent, Agent], host_bin: Path, fake_model: FakeModel, host_home: Path,
    host_procs: ProcessGroup, tmp_path: Path,
) -> Iterator[Rig]:
    alice, bob = pair
    project = tmp_path / "project"  # no .opencode/ dir: it would make opencode wait on npm
    write_opencode_config(project, fake_model.url)
    server = OpencodeServer(host_procs, host_bin, project, host_env(host_home), tmp_path / "oc-logs",
                            free_port())
    server.start()
    bob.ok("follow", "--peer", "alice")
    pids: list[int] = []
    try:
        started = alarm(bob, "opencode", "--url", server.url)
        pids.append(int(started["pid"]))
        r = Rig(alice, bob, fake_model, server, str(started["session"]), pids)
        wait_for(lambda: any(s["sid"] == r.sid and s["alive"] for s in
                             bob.ok("session", "list", "--json").json()), 30, "the session's registration")
        warm = marker("WARMUP")
        r.send(warm)
        fake_model.wait_for(warm, WARM_S)
        yield r
    finally:
        bob.run("stop")
        subprocess.run([TALK, "alarm", "stop", "opencode"], env=bob.env(), cwd=ROOT,
                       capture_output=True, timeout=30)
        for pid in pids:
            _kill(pid)


@pytest.mark.hosts
def test_mail_reaches_the_model_within_2_s_of_the_spool_exactly_once(rig: Rig) -> None:
    text = marker("HELLO-OPENCODE")
    rig.send(text)
    spooled = wait_for(lambda: rig.spooled(text), 20, "the message in bob's spool")
    seen = rig.model.wait_for(text, 10)
    assert seen["ts"] - spooled < 2.0, f"{seen['ts'] - spooled:.2f} s from spool to model"
    assert rig.alarm_pids[0] == running_pid(rig.bob.home / "bob", rig.sid)
    [row] = [r for r in alarm_status(rig.bob.home / "bob") if r["session"] == rig.sid]
    assert row["running"] and row["delivered"] >= 2 and row["outbox"] == 0
    assert rig.opencode.proc is not None and row["host_pid"] == rig.opencode.proc.pid
    again = alarm(rig.bob, "opencode", "--url", rig.opencode.url)
    assert again == {"pid": rig.alarm_pids[0], "session": rig.sid, "url": rig.opencode.url, "started": False}
    time.sleep(2)  # a second delivery would come within this
    rig.delivered_once(text)
    # The alarm logged its hand-over: bob's follower tells alice, whose receive takes the receipt.
    wait_for(lambda: rig.alice.ok("receive").out == ""
             and rig.alice.ok("outbox", "--json").json()[-1]["state"] == "delivered", 15, "the receipt")
    stopped = alarm(rig.bob, "stop", "opencode", "--session", rig.sid)
    assert stopped == {"stopped": [{"session": rig.sid, "pid": rig.alarm_pids[0]}]}
    assert running_pid(rig.bob.home / "bob", rig.sid) is None


@pytest.mark.hosts
def test_opencode_takes_a_batch_posted_twice_as_one_turn(rig: Rig) -> None:
    """What makes a retried post safe: opencode upserts a message under the caller's ids."""
    text = marker("POSTED-TWICE")
    batch = new_prompt([record("retried")], text, int(time.time() * 1000))
    client = OpencodeClient(rig.opencode.url)
    client.prompt_async(rig.sid, batch.body())
    client.prompt_async(rig.sid, batch.body())  # a retry before the turn ran
    rig.model.wait_for(text, 20)
    time.sleep(1)
    client.prompt_async(rig.sid, batch.body())  # a retry after the turn (a crash after the 204)
    time.sleep(2)
    rig.delivered_once(text)


@pytest.mark.hosts
def test_mail_sent_while_opencode_is_down_arrives_once_when_it_is_back(rig: Rig) -> None:
    rig.opencode.stop()
    texts = [marker("WHILE-DOWN-1"), marker("WHILE-DOWN-2")]
    for text in texts:
        rig.send(text)
    for text in texts:
        wait_for(lambda t=text: rig.spooled(t), 20, f"{text} in bob's spool")  # type: ignore[misc]
    time.sleep(1)
    assert all(rig.model.count(t) == 0 for t in texts)
    rig.opencode.start()  # same HOME, project and port: the session and the URL are still there
    for text in texts:
        rig.model.wait_for(text, WARM_S)
    time.sleep(2)
    for text in texts:
        rig.delivered_once(text)
    [row] = [r for r in alarm_status(rig.bob.home / "bob") if r["session"] == rig.sid]
    assert rig.opencode.proc is not None and row["host_pid"] == rig.opencode.proc.pid  # registered again


@pytest.mark.hosts
def test_a_busy_session_gets_the_mail_right_after_its_current_step(rig: Rig) -> None:
    http_json("POST", f"{rig.opencode.url}/session/{rig.sid}/prompt_async",
              {"parts": [{"type": "text", "text": "SLOW_REPLY please"}]}, timeout=10)
    slow = rig.model.wait_for("SLOW_REPLY", 20)
    text = marker("WHILE-BUSY")
    rig.send(text)
    wait_for(lambda: rig.spooled(text), 20, "the message in bob's spool")
    status = http_json("GET", f"{rig.opencode.url}/session/status", timeout=10)
    assert status.get(rig.sid, {}).get("type") == "busy", "the slow turn ended before the mail came"
    seen = rig.model.wait_for(text, 60)
    chats = [r for r in rig.model.requests if r["path"].startswith("/v1/chat")]
    after = [r for r in chats if r["n"] > slow["n"]]
    assert after and after[0]["n"] == seen["n"], "the mail was not in the request right after the slow step"
    time.sleep(2)
    rig.delivered_once(text)


@pytest.mark.hosts
def test_kill_9_of_the_alarm_at_random_moments_loses_and_repeats_nothing(rig: Rig) -> None:
    texts = [marker(f"KILLED-{i}") for i in range(8)]
    done = threading.Event()
    errors: list[BaseException] = []

    def send_all() -> None:
        try:
            for text in texts:
                rig.send(text)
                time.sleep(random.uniform(0.0, 0.3))
        except BaseException as exc:
            errors.append(exc)
        finally:
            done.set()

    sender = threading.Thread(target=send_all)
    sender.start()
    kills = 0
    while not done.is_set() or kills < 4:
        time.sleep(random.uniform(0.05, 0.6))
        pid = running_pid(rig.bob.home / "bob", rig.sid)
        if pid and pid > 0:
            _kill(pid)
            kills += 1
            wait_for(lambda: running_pid(rig.bob.home / "bob", rig.sid) is None, 5, "the lock to drop")
        rig.start_alarm()
    sender.join()
    assert not errors, errors
    for text in texts:
        rig.model.wait_for(text, 30)
    time.sleep(2)
    for text in texts:
        rig.delivered_once(text)


@pytest.mark.hosts
def test_a_crash_before_the_post_or_after_the_204_is_healed_by_the_outbox(rig: Rig) -> None:
    """The two windows a random kill -9 rarely hits, made on purpose with the alarm stopped."""
    from alarms.framing import frame

    folder = rig.bob.home / "bob"
    layout = SpoolLayout(folder / "spool")
    reader = CursorReader(layout.session_file(rig.sid), layout.cursor_file(rig.sid))
    outbox = PromptOutbox(AlarmFiles(folder, rig.sid).outbox)
    alarm(rig.bob, "stop", "opencode")
    for label, post_first in (("CRASH-BEFORE-POST", False), ("CRASH-AFTER-204", True)):
        text = marker(label)
        rig.send(text)
        wait_for(lambda t=text: rig.spooled(t), 20, f"{label} in bob's spool")  # type: ignore[misc]
        state = outbox.fill(reader, lambda rs: new_prompt(rs, frame(rs), int(time.time() * 1000)))
        assert state.pending is not None and reader.count_unread() == 0  # the cursor has moved on
        if post_first:
            OpencodeClient(rig.opencode.url).prompt_async(rig.sid, state.pending.body())
            rig.model.wait_for(text, 20)
        pid = rig.start_alarm()
        wait_for(lambda: outbox.load().pending is None, 20, "the outbox to empty")
        rig.model.wait_for(text, 20)
        time.sleep(2)
        rig.delivered_once(text)
        alarm(rig.bob, "stop", "opencode")
        assert running_pid(folder, rig.sid) is None and pid in rig.alarm_pids
