"""The opencode alarm's pure parts: prompt ids and batches, the outbox over a real spool, the
status file, the event stream's reading and the verdict on a posted batch. No opencode runs here."""

from __future__ import annotations

import json
import os
import re
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from alarms.hosts.opencode.api import OpencodeClient, OpencodeDown, split_url
from alarms.hosts.opencode.daemon import RETRY, choose_pid, due, is_loopback
from alarms.hosts.opencode.events import Activity, Run, apply, parse
from alarms.hosts.opencode.outbox import (
    Prompt,
    PromptOutbox,
    PromptOutboxState,
    accepted,
    fresh,
    new_prompt,
    opencode_id,
    settled,
)
from alarms.hosts.opencode.status import (
    SessionDoorFiles,
    SessionDoorStatus,
    render_door,
    running_pid,
    session_doors,
)
from alarms.hosts.opencode.verdict import PromptVerdict, verdict
from alarms.procnet import listening_inodes, pid_listening_on
from durable.errors import UserError
from spool_writer import lines
from spool_writer.cursor import CursorReader
from spool_writer.layout import SpoolLayout
from spool_writer.record import SpoolRecord
from spool_writer.sessions import register
from tests.conftest import free_port

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
    assert done == PromptOutboxState(None, ("a", "b"), 4, (pending,))  # awaiting its verdict
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
    assert session_doors(tmp_path) == []
    files = SessionDoorFiles(tmp_path, "ses_x")
    SessionDoorStatus(pid=123, url="http://127.0.0.1:1", session="ses_x",
                      state="delivering").save(files.status)
    PromptOutbox(files.outbox).save(PromptOutboxState(new_prompt([record("a")], "x", 1)))
    [row] = session_doors(tmp_path)
    assert row["running"] is False and row["state"] == "stopped" and row["outbox"] == 1
    assert row["session"] == "ses_x" and row["host"] == "opencode"
    assert running_pid(tmp_path, "ses_x") is None
    assert "not running (1 message(s) in its outbox); start it with `talk door opencode --url " \
        "http://127.0.0.1:1 --session ses_x`" in render_door(row)


def test_a_damaged_outbox_says_what_to_do(tmp_path: Path) -> None:
    (tmp_path / "outbox.json").write_text('{"pending": {"text": 1}}')
    with pytest.raises(UserError, match="move it aside"):
        PromptOutbox(tmp_path / "outbox.json").load()


# --- real host: opencode serve, the fake model, a relay, bob's follower, the alarm ------------


def test_parse_reads_the_data_lines_of_the_stream_and_nothing_else() -> None:
    assert parse(b'data: {"type":"session.idle","properties":{"sessionID":"s"}}') == (
        "session.idle", {"sessionID": "s"})
    assert parse(b'data: {"type":"server.connected"}') == ("server.connected", {})
    assert parse(b"event: x") is None and parse(b"data: {broken") is None and parse(b"data: []") is None


def test_apply_follows_one_session_and_counts_its_idle_transitions() -> None:
    busy = {"sessionID": "s", "status": {"type": "busy"}}
    idle = {"sessionID": "s", "status": {"type": "idle"}}
    a = apply(Activity(), "session.status", busy, "s")
    assert a == Activity(Run.BUSY, 0)
    assert apply(a, "session.status", {**busy, "sessionID": "other"}, "s") == a
    assert apply(a, "message.updated", {"sessionID": "s"}, "s") == a
    a = apply(a, "session.status", idle, "s")
    assert a == Activity(Run.IDLE, 1)
    assert apply(a, "session.idle", {"sessionID": "s"}, "s") == a  # the same transition, told twice
    retry = apply(a, "session.status", {"sessionID": "s", "status": {"type": "retry"}}, "s")
    assert retry.run == Run.BUSY and apply(retry, "session.idle", {"sessionID": "s"}, "s").idles == 2


def test_apply_knows_which_permissions_and_questions_are_open_for_the_person() -> None:
    busy = apply(Activity(), "session.status", {"sessionID": "s", "status": {"type": "busy"}}, "s")
    a = apply(busy, "permission.asked", {"id": "per_1", "sessionID": "s", "permission": "bash"}, "s")
    a = apply(a, "question.asked", {"id": "que_1", "sessionID": "s"}, "s")
    assert a.asking == {"per_1", "que_1"} and a.run == Run.BUSY
    assert apply(a, "permission.asked", {"id": "per_9", "sessionID": "other"}, "s") == a
    a = apply(a, "permission.replied", {"sessionID": "s", "requestID": "per_1", "reply": "once"}, "s")
    assert a.asking == {"que_1"}
    assert apply(a, "question.rejected", {"sessionID": "s", "requestID": "que_1"}, "s").asking == frozenset()
    assert apply(a, "question.replied", {"sessionID": "s", "requestID": "que_1"}, "s").asking == frozenset()
    # An answer the stream missed: the run's end closes what it asked.
    assert apply(a, "session.idle", {"sessionID": "s"}, "s").asking == frozenset()


def info(mid: str, role: str, parent: str | None = None) -> dict[str, Any]:
    return {"id": mid, "role": role, **({"parentID": parent} if parent else {})}


def test_verdict_says_missing_stranded_or_taken() -> None:
    ours = "msg_2"
    history = [info("msg_1", "user"), info("msg_1a", "assistant", "msg_1")]
    assert verdict(ours, False, history) == PromptVerdict.MISSING
    assert verdict(ours, True, [*history, info(ours, "user")]) == PromptVerdict.STRANDED
    answered = [*history, info(ours, "user"), info("msg_2a", "assistant", ours)]
    assert verdict(ours, True, answered) == PromptVerdict.TAKEN
    later = [info(ours, "user"), info("msg_3", "user"), info("msg_3a", "assistant", "msg_3")]
    assert verdict(ours, True, later) == PromptVerdict.TAKEN  # the run that answered msg_3 read ours
    past = [info("msg_9a", "assistant", "msg_9")]
    assert verdict(ours, True, past) == PromptVerdict.TAKEN  # past the window


def test_a_post_is_judged_after_an_idle_that_followed_it_or_after_a_settling_time() -> None:
    assert not due(False, 5, None, 100.0)
    assert due(True, 0, None, 100.0)  # posted before a restart: judge at the first idle
    assert not due(True, 3, (100.0, 3, 0), 100.5) and due(True, 4, (100.0, 3, 0), 100.5)
    assert not due(True, 3, (100.0, 3, 0), 104.0) and due(True, 3, (100.0, 3, 0), 105.0)
    assert not due(True, 3, (100.0, 3, 2), 110.0) and due(True, 3, (100.0, 3, 2), 120.0)  # backs off


def test_accepted_prompts_wait_for_their_verdict_on_disk(tmp_path: Path) -> None:
    first, second = new_prompt([record("a")], "x", 1), new_prompt([record("b")], "y", 2)
    state = accepted(PromptOutboxState(first))
    state = accepted(PromptOutboxState(second, state.recent, state.delivered, state.posted))
    assert state.posted == (first, second) and state.pending is None
    outbox = PromptOutbox(tmp_path / "outbox.json")
    outbox.save(state)
    assert outbox.load() == state
    assert settled(state, first.message_id).posted == (second,)
    assert accepted(PromptOutboxState(second, posted=(first,)), posted=1).posted == (second,)
    assert PromptOutboxState.from_json({"pending": None, "recent": [], "delivered": 3}).posted == ()
