"""The door of `talk run codex`, its deciding parts: what the server's notifications say about the
TUI's thread, and when mail may go to it; and the hooks standing down while the door lives."""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path

from alarms import handover
from alarms.hosts.codex import hook as codex_hook
from alarms.hosts.codex.remote_door import ThreadView, may_give, noted, turn_input, unknown_thread
from alarms.mailbox import SessionMail
from durable.locks import hold_for_life
from spool_writer.record import SpoolRecord
from spool_writer.spool import Spool

SID = "01a24320-4578-7ee3-87ed-3281cd27f64c"
ROLLOUT = "/h/.codex/sessions/2026/12/04/rollout-x.jsonl"


def started(thread_id: str = SID, **more: object) -> dict[str, object]:
    thread = {"id": thread_id, "ephemeral": False, "parentThreadId": None, "path": ROLLOUT,
              "status": {"type": "idle"}, **more}
    return {"method": "thread/started", "params": {"thread": thread}}


def status(kind: str, *flags: str, thread_id: str = SID) -> dict[str, object]:
    body: dict[str, object] = {"type": kind}
    if kind == "active":
        body["activeFlags"] = list(flags)
    return {"method": "thread/status/changed", "params": {"threadId": thread_id, "status": body}}


def test_the_tuis_thread_is_known_from_its_start_before_any_prompt() -> None:
    view = noted(ThreadView(), started())
    assert view == ThreadView(SID, ROLLOUT, "idle", ())
    assert may_give(view)


def test_codex_own_throwaway_and_sub_agent_threads_are_not_the_session() -> None:
    view = noted(ThreadView(), started())
    assert noted(view, started("title-thread", ephemeral=True)) == view
    assert noted(view, started("sub-agent", parentThreadId=SID)) == view
    assert noted(view, status("active", thread_id="title-thread")) == view


def test_mail_goes_to_an_idle_or_busy_thread_but_never_over_a_question_to_the_user() -> None:
    view = noted(ThreadView(), started())
    busy = noted(view, status("active"))
    assert may_give(busy)  # a steer of the running turn
    asking = noted(busy, status("active", "waitingOnApproval"))
    assert asking.flags == ("waitingOnApproval",) and not may_give(asking)
    assert not may_give(noted(busy, status("active", "waitingOnUserInput")))
    assert may_give(noted(asking, status("idle")))
    assert not may_give(noted(view, status("systemError")))
    assert not may_give(ThreadView())  # no thread yet


def test_a_new_thread_of_the_tui_replaces_the_old() -> None:
    other = str(uuid.uuid4())
    assert noted(noted(ThreadView(), started()), started(other)).sid == other


def test_damaged_notifications_change_nothing() -> None:
    view = noted(ThreadView(), started())
    damaged: list[dict[str, object]] = [
                 {"method": "thread/started"}, {"method": "thread/started", "params": {"thread": "x"}},
                 {"method": "thread/status/changed", "params": {"threadId": SID, "status": "idle"}},
                 {"params": []}]
    for note in damaged:
        after = noted(view, note)
        assert after.sid == SID


def test_the_mail_is_plain_text_input() -> None:
    assert turn_input("FRAME") == [{"type": "text", "text": "FRAME", "text_elements": []}]


def test_hooks_stand_down_while_the_door_holds_its_lock(folder: Path, tmp_path: Path) -> None:
    lock = tmp_path / "door.lock"
    env = {"TALK_CODEX_DOOR": str(lock)}
    assert not codex_hook.door_open({}) and not codex_hook.door_open(env)  # no door, or no lock yet
    fd = hold_for_life(lock)
    assert fd is not None
    try:
        assert codex_hook.door_open(env)
        payload = '{"hook_event_name": "Stop", "session_id": "s1", "cwd": "/p"}'
        assert codex_hook.handle(payload, {**env, "TALK_HOME": str(folder.parent)}) == {}
    finally:
        os.close(fd)
    assert not codex_hook.door_open(env)  # the door died: the hooks deliver again


def record(text: str) -> SpoolRecord:
    return {"id": uuid.uuid4().hex, "from": "a" * 32, "name": "alice", "text": text,
            "ts": "2026-12-04T22:00:00Z", "kind": "chat"}


def test_a_turn_batch_is_delivered_once_the_rollout_shows_it(folder: Path, tmp_path: Path) -> None:
    """Taken and pending under the door; `delivered` when a later take finds its markers."""
    mail = SessionMail(folder, "s1")
    mail.register("codex", os.getpid())
    Spool(folder / "spool").deliver(m := record("hello"))
    rollout = tmp_path / "rollout.jsonl"
    taken = handover.take(mail.layout, "s1", str(rollout), record=True, door=handover.TURN)
    assert [r["id"] for r in taken] == [m["id"]]
    handed = mail.layout.handed
    assert not handed.exists() or m["id"] not in handed.read_text()  # accepted is not yet delivered
    assert handover.take(mail.layout, "s1", str(rollout), record=True, door=handover.TURN) == []
    line = {"type": "response_item", "payload": {"text": f"... id {m['id']} ..."}}
    rollout.write_text(json.dumps(line) + "\n")
    assert handover.take(mail.layout, "s1", str(rollout), record=True, door=handover.TURN) == []
    assert m["id"] in handed.read_text() and "delivered" in handed.read_text()
    assert not Path(handover.pending_file(str(mail.layout.sessions_dir), "s1")).exists()


def test_a_resumed_thread_shows_only_by_its_status_and_is_looked_up_once() -> None:
    view = noted(ThreadView(), started())
    other = str(uuid.uuid4())
    assert unknown_thread(view, status("idle", thread_id=other), set()) == other
    assert unknown_thread(view, status("idle", thread_id=other), {other}) is None  # looked up already
    assert unknown_thread(view, status("idle"), set()) is None  # the session's own
    assert unknown_thread(view, started(other), set()) is None
