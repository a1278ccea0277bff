"""alarms.handover's TURN door: a batch sent as a prompt the host's server accepted is `written`,
then `delivered` when the host's transcript shows each id (`settle`); one whose holder died and
whose transcript moved on without it is handed on again, once."""

from __future__ import annotations

import os
import subprocess
import time
import uuid
from pathlib import Path

from alarms import handover
from alarms.mailbox import SessionMail
from durable.receipt_states import Receipt
from spool_writer.record import SpoolRecord
from spool_writer.spool import Spool, received_now
from tests.unit.samples import handed_states

FP = "cd" * 16


def delivered_to(folder: Path, sid: str, text: str) -> tuple[SessionMail, SpoolRecord]:
    mail = SessionMail(folder, sid)
    mail.register("copilot", os.getpid())
    msg: SpoolRecord = {"id": uuid.uuid4().hex, "from": FP, "name": "alice", "text": text,
                        "ts": "2026-12-04T00:00:00Z", "kind": "chat"}
    Spool(folder / "spool").deliver({**msg, "received": received_now()})
    return mail, msg


def take(mail: SessionMail, transcript: Path) -> list[SpoolRecord]:
    return handover.take(mail.layout, mail.sid, str(transcript), record=True, door=handover.TURN,
                         fit=lambda out: (len(out), None))


def test_a_prompt_is_written_when_accepted_and_delivered_when_the_transcript_shows_it(
    folder: Path, tmp_path: Path,
) -> None:
    mail, msg = delivered_to(folder, "s-prompt", "hello through the server")
    transcript = tmp_path / "events.jsonl"
    transcript.write_text("{}\n")
    assert [r["id"] for r in take(mail, transcript)] == [msg["id"]]
    assert not mail.layout.handed.exists()  # taken, not yet accepted: no receipt
    handover.written(mail.layout, mail.sid, [msg], os.getpid())
    assert handover.settle(mail.layout, mail.sid, str(transcript)) == []
    with transcript.open("a") as f:
        f.write(f'{{"type":"user.message","data":{{"content":"... id {msg["id"]} ..."}}}}\n')
    assert handover.settle(mail.layout, mail.sid, str(transcript)) == [msg["id"]]
    assert handed_states(mail.layout, msg["id"]) == [Receipt.WRITTEN, Receipt.DELIVERED]
    assert not Path(handover.pending_file(str(mail.layout.sessions_dir), mail.sid)).exists()
    assert take(mail, transcript) == []


def test_a_prompt_the_host_lost_is_handed_on_again_once(folder: Path, tmp_path: Path) -> None:
    mail, msg = delivered_to(folder, "s-lost", "this one the host never showed")
    transcript = tmp_path / "events.jsonl"
    transcript.write_text("{}\n")
    holder = subprocess.Popen(["true"])
    holder.wait()  # the process that held it is gone
    assert take(mail, transcript)
    handover.written(mail.layout, mail.sid, [msg], holder.pid)
    path = Path(handover.pending_file(str(mail.layout.sessions_dir), mail.sid))
    later = time.time() + handover.MARGIN_S + 1
    os.utime(transcript, (later, later))  # the host wrote on, well after, without it
    assert handover.settle(mail.layout, mail.sid, str(transcript)) == []
    assert path.exists()  # released for the next take
    assert [r["id"] for r in take(mail, transcript)] == [msg["id"]]
    assert take(mail, transcript) == []
