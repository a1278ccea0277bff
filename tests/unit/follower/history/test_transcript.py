"""follower.history.transcript over real files: the spool as the writer writes it, the outbox, the held
box and the task ledger; read once, then only what changed, through rotation and compaction."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import follower.history.receivelog as receivelog_mod
import follower.history.transcript as transcript_mod
import follower.send.outbox as outbox_mod
from durable.ndjson import append_records
from follower.held import HeldBox
from follower.history.receivelog import RECEIVE_LOG_FILE, ReceiveLog
from follower.history.timeline import Direction
from follower.history.transcript import Transcript
from follower.send.outbox import Outbox
from follower.tasks.ledger import TaskLedger
from spool_writer.record import SpoolRecord
from spool_writer.sessions import register
from spool_writer.spool import Spool
from tests.unit.samples import FP_A, FP_B, hexid

NAMES = {FP_A: "alice", FP_B: "bob"}


def message(n: int, sender: str = FP_A) -> SpoolRecord:
    return {"id": hexid(n), "from": sender, "name": NAMES[sender], "text": f"text {n}",
            "ts": "2024-01-01T00:00:00Z", "kind": "chat"}


def send(box: Outbox, n: int, to: str = FP_A) -> str:
    box.sent(hexid(n), to, NAMES[to], "chat", f"sent {n}", "tag", "blob")
    return hexid(n)


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    folder = tmp_path / "me"
    folder.mkdir(mode=0o700)
    return folder


def test_read_gives_each_message_once_from_every_spool_copy_with_held_and_sent(folder: Path) -> None:
    spool = Spool(folder / "spool")
    spool.deliver(message(1))  # no session yet: the inbox
    register(folder / "spool", "other", "s1", os.getpid())
    register(folder / "spool", "other", "s2", os.getpid())
    spool.deliver(message(2))  # a copy in each session
    spool.deliver(message(3, FP_B))
    HeldBox(folder).hold(dict(message(4)), "policy: hold")
    send(Outbox(folder), 5)
    send(Outbox(folder), 6, FP_B)
    lines = Transcript(folder, FP_A, NAMES).read()
    assert [(line.id, line.direction, line.held) for line in lines] == [
        (hexid(1), Direction.IN, False), (hexid(2), Direction.IN, False), (hexid(4), Direction.IN, True),
        (hexid(5), Direction.OUT, False)]
    everyone = Transcript(folder, None, NAMES).read()
    assert sorted(line.id for line in everyone) == [hexid(n) for n in range(1, 7)]


def test_changes_give_only_what_came_and_sent_mail_again_when_its_state_moves(folder: Path) -> None:
    spool, box = Spool(folder / "spool"), Outbox(folder)
    spool.deliver(message(1))
    sent_id = send(box, 2)
    transcript = Transcript(folder, FP_A, NAMES)
    assert len(transcript.read()) == 2
    assert transcript.changes() == []
    spool.deliver(message(3))
    box.receipts([(sent_id, "spooled", "")])
    changed = transcript.changes()
    assert [(line.id, line.state) for line in changed] == [(sent_id, "spooled"), (hexid(3), None)]
    box.receipts([(sent_id, "stored", "")])  # a late receipt that moves nothing
    assert transcript.changes() == []


def test_following_survives_spool_rotation_without_repeating(folder: Path) -> None:
    spool = Spool(folder / "spool", max_bytes=300, generations=20)
    transcript = Transcript(folder, FP_A, NAMES)
    spool.deliver(message(1))
    assert [line.id for line in transcript.read()] == [hexid(1)]
    for n in range(2, 8):  # each line is about 200 bytes: every other one rotates the file
        spool.deliver(message(n))
    assert [line.id for line in transcript.changes()] == [hexid(n) for n in range(2, 8)]
    assert transcript.changes() == []


def test_following_survives_outbox_compaction(folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(outbox_mod, "COMPACT_BYTES", 600)
    box = Outbox(folder)
    transcript = Transcript(folder, FP_A, NAMES)
    first = send(box, 1)
    box.receipts([(first, "delivered", "")])  # settles: moves to the history at compaction
    assert [(line.id, line.state) for line in transcript.read()] == [(first, "delivered")]
    ids = [send(box, n) for n in range(2, 6)]  # the log outgrows 600 bytes: compacted
    assert (folder / outbox_mod.HISTORY_FILE).exists()
    assert sorted(line.id for line in transcript.changes()) == ids  # the settled one not again
    box.receipts([(ids[0], "refused", "not now")])
    assert [(line.id, line.state, line.reason) for line in transcript.changes()] == [
        (ids[0], "refused", "not now")]


def test_the_recent_view_reads_only_the_historys_tail_and_all_reads_it_whole(
        folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(transcript_mod, "RECENT_BYTES", 400)
    lines = [{"ev": "entry", "id": hexid(n), "to": FP_A, "name": "alice", "kind": "chat", "text": "x",
              "ts": float(n), "state": "delivered"} for n in range(20)]
    append_records(folder / outbox_mod.HISTORY_FILE, lines)
    recent = Transcript(folder, FP_A, NAMES).read()
    assert 0 < len(recent) < 20 and recent[-1].id == hexid(19)
    assert len(Transcript(folder, FP_A, NAMES, everything=True).read()) == 20


def test_new_held_mail_is_given_once_and_tasks_carry_their_status(folder: Path) -> None:
    transcript = Transcript(folder, FP_A, NAMES)
    assert transcript.read() == []
    box = HeldBox(folder)
    box.hold(dict(message(1)), "over the rate")
    Outbox(folder).sent(hexid(2), FP_A, "alice", "chat", "[opencode-mesh v1] ...", "tag", "blob", task="me-1")
    TaskLedger(folder).record("task", "out", FP_A, "alice", {"task": "me-1", "text": "count"}, hexid(2))
    held, task = transcript.changes()
    assert (held.held, held.reason) == (True, "over the rate")
    assert (task.kind, task.task, task.task_status, task.gist) == ("task", "me-1", "open", "count")
    box.hold(dict(message(3)), "over the rate")
    assert [line.id for line in transcript.changes()] == [hexid(3)]


def test_mail_talk_receive_took_is_received_mail_beside_the_spool_each_id_once(folder: Path) -> None:
    log = ReceiveLog(folder)
    Spool(folder / "spool").deliver(message(1))
    log.add(dict(message(1)))  # in both: one message
    log.add(dict(message(2)))
    log.add(dict(message(2)))  # taken again after a crash before its ack
    log.add(dict(message(3, FP_B)))
    with (folder / RECEIVE_LOG_FILE).open("ab") as f:
        f.write(b'{"id": "x"}\n[1]\n')  # not whole records: skipped
    send(Outbox(folder), 4)
    transcript = Transcript(folder, FP_A, NAMES)
    assert [(line.id, line.direction) for line in transcript.read()] == [
        (hexid(1), Direction.IN), (hexid(2), Direction.IN), (hexid(4), Direction.OUT)]
    log.add(dict(message(2)))
    log.add(dict(message(5)))
    assert [line.id for line in transcript.changes()] == [hexid(5)]


def test_following_survives_the_receive_log_being_trimmed(
        folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(receivelog_mod, "TRIM_BYTES", 1500)
    monkeypatch.setattr(receivelog_mod, "KEEP_BYTES", 700)
    log = ReceiveLog(folder)
    transcript = Transcript(folder, FP_A, NAMES)
    log.add(dict(message(1)))
    assert [line.id for line in transcript.read()] == [hexid(1)]
    inode = (folder / RECEIVE_LOG_FILE).stat().st_ino
    for n in range(2, 12):  # about 200 bytes each: the log is trimmed (a new file) on the way
        log.add(dict(message(n)))
        assert [line.id for line in transcript.changes()] == [hexid(n)]  # the kept ones not again
    assert (folder / RECEIVE_LOG_FILE).stat().st_ino != inode
