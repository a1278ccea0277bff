"""The opencode alarm against a real `opencode serve`: opencode 1.18.33 against the fake model on
loopback, with a real relay, bob's follower and the alarm daemon; every message alice sends
becomes exactly one new user turn for the model."""

from __future__ import annotations

import time

import pytest

from alarms.hosts.opencode.api import OpencodeClient
from alarms.hosts.opencode.outbox import (
    PromptOutbox,
    new_prompt,
)
from alarms.hosts.opencode.status import SessionDoorFiles, running_pid, session_doors
from durable.receipt_states import Receipt
from spool_writer.cursor import CursorReader
from spool_writer.layout import SpoolLayout
from tests.conftest import Agent, free_port, wait_for
from tests.hosts.opencode import WARM_S, Rig, alarm, alarm_run, http_json, kill9, marker
from tests.hosts.roles import MAIL, arrives_as_claimed
from tests.unit.samples import handed_states, spool_message


def test_without_opencode_the_alarm_says_what_to_do_and_waits_keeping_the_mail(bob: Agent) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    p = alarm_run(bob, "opencode", "--url", url)
    assert p.returncode == 1 and "start `opencode serve` there, or pass --session" in p.stderr
    started = alarm(bob, "opencode", "--url", url, "--session", "ses_later")
    folder = bob.home / "bob"
    try:
        assert started["started"] is True and running_pid(folder, "ses_later") == started["pid"]
        wait_for(lambda: any(r["state"] == "waiting for opencode" for r in session_doors(folder)), 10,
                 "the alarm to report opencode down")
        [row] = session_doors(folder)
        assert "did not answer" in row["last_error"] and "mail is kept" in row["last_error"]
        assert alarm(bob, "opencode", "--url", url, "--session", "ses_later")["started"] is False
        assert alarm(bob, "stop", "opencode")["stopped"] == [{"session": "ses_later", "pid": started["pid"]}]
        assert session_doors(folder)[0]["running"] is False
    finally:
        kill9(int(started["pid"]))


@pytest.mark.hosts
def test_mail_reaches_the_model_exactly_once_and_earns_written_then_delivered(rig: Rig) -> None:
    """How fast is bench/wake_latency.py's to say; this says what arrives, once, and what it earns."""
    text = marker("HELLO-OPENCODE")
    rig.send(f"{text}\n{MAIL}")
    msg_id = rig.alice.ok("outbox", "--json").json()[-1]["id"]
    wait_for(lambda: rig.spooled(text), 20, "the message in bob's spool")
    arrives_as_claimed(rig.model.wait_for(text, 30), text, "opencode", "prompt_async")
    assert rig.alarm_pids[0] == running_pid(rig.bob.home / "bob", rig.sid)
    [row] = [r for r in session_doors(rig.bob.home / "bob") if r["session"] == rig.sid]
    assert row["running"] and row["delivered"] >= 2 and row["outbox"] == 0
    assert rig.opencode.proc is not None and row["host_pid"] == rig.opencode.proc.pid
    again = alarm(rig.bob, "opencode", "--url", rig.opencode.url)
    assert again == {"pid": rig.alarm_pids[0], "session": rig.sid, "url": rig.opencode.url, "started": False}
    rig.settled()  # a second delivery would have been posted by then
    rig.delivered_once(text)
    # The alarm logged its hand-over: bob's follower tells alice, whose receive takes the receipt.
    wait_for(lambda: rig.alice.ok("receive").out == ""
             and rig.alice.ok("outbox", "--json").json()[-1]["state"] == "delivered", 30, "the receipt")
    assert handed_states(SpoolLayout(rig.spool_root), msg_id) == [Receipt.WRITTEN, Receipt.DELIVERED]
    stopped = alarm(rig.bob, "stop", "opencode", "--session", rig.sid)
    assert stopped == {"stopped": [{"session": rig.sid, "pid": rig.alarm_pids[0]}]}
    assert running_pid(rig.bob.home / "bob", rig.sid) is None


@pytest.mark.hosts
def test_opencode_takes_a_batch_posted_twice_as_one_turn(rig: Rig) -> None:
    """What makes a retried post safe: opencode upserts a message under the caller's ids."""
    text = marker("POSTED-TWICE")
    batch = new_prompt([spool_message("retried")], text, int(time.time() * 1000))
    client = OpencodeClient(rig.opencode.url)
    client.prompt_async(rig.sid, batch.body())
    client.prompt_async(rig.sid, batch.body())  # a retry before the turn ran
    rig.model.wait_for(text, 20)
    rig.settled()
    client.prompt_async(rig.sid, batch.body())  # a retry after the turn (a crash after the 204)
    rig.settled()
    rig.delivered_once(text)


@pytest.mark.hosts
def test_mail_sent_while_opencode_is_down_arrives_once_when_it_is_back(rig: Rig) -> None:
    rig.opencode.stop()
    texts = [marker("WHILE-DOWN-1"), marker("WHILE-DOWN-2")]
    for text in texts:
        rig.send(text)
    for text in texts:
        wait_for(lambda t=text: rig.spooled(t), 20, f"{text} in bob's spool")  # type: ignore[misc]
    assert all(rig.model.count(t) == 0 for t in texts)  # opencode is down: nothing can reach it
    rig.opencode.start()  # same HOME, project and port: the session and the URL are still there
    for text in texts:
        rig.model.wait_for(text, WARM_S)
    rig.settled()
    for text in texts:
        rig.delivered_once(text)
    [row] = [r for r in session_doors(rig.bob.home / "bob") if r["session"] == rig.sid]
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
    rig.settled()
    rig.delivered_once(text)


@pytest.mark.hosts
def test_kill_9_of_the_alarm_at_random_moments_loses_and_repeats_nothing(rig: Rig) -> None:
    texts = [marker(f"KILLED-{i}") for i in range(8)]
    rig.send_killing_the_alarm(texts)
    for text in texts:
        rig.model.wait_for(text, 30)
    rig.settled()
    for text in texts:
        rig.delivered_once(text)


@pytest.mark.hosts
def test_a_crash_before_the_post_or_after_the_204_is_healed_by_the_outbox(rig: Rig) -> None:
    """The two windows a random kill -9 rarely hits, made on purpose with the alarm stopped."""
    from alarms.framing import frame

    folder = rig.bob.home / "bob"
    layout = SpoolLayout(folder / "spool")
    reader = CursorReader(layout.session_file(rig.sid), layout.cursor_file(rig.sid))
    outbox = PromptOutbox(SessionDoorFiles(folder, rig.sid).outbox)
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
        rig.settled()
        rig.delivered_once(text)
        alarm(rig.bob, "stop", "opencode")
        assert running_pid(folder, rig.sid) is None and pid in rig.alarm_pids
