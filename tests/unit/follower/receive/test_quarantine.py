"""follower.receive.quarantine: kept refusals, and which of them came again and were taken after all."""

from __future__ import annotations

from pathlib import Path

from follower.history.receivelog import ReceiveLog
from follower.receive.quarantine import Quarantine, arrived_ids, settled
from spool_writer.record import SpoolRecord
from spool_writer.spool import Spool

LOST, PRINTED, SPOOLED = "a" * 32, "b" * 32, "c" * 32


def record(msg_id: str) -> SpoolRecord:
    return {"id": msg_id, "from": "f" * 32, "name": "alice", "text": "hi", "ts": "2026-12-01T00:00:00Z",
            "kind": "chat"}


def test_an_entry_is_recovered_only_when_its_id_was_handed_on_later(tmp_path: Path) -> None:
    box = Quarantine(tmp_path)
    for msg_id in (LOST, PRINTED, SPOOLED):
        box.keep("r-" + msg_id, "tag", b"blob", "no session: nothing opens it", "f" * 32, msg_id)
    box.keep("r-none", "tag", b"junk", "does not open")  # no id could be read: never recovered
    assert len(box.lost()) == 4 and box.count() == 4
    ReceiveLog(tmp_path).add(dict(record(PRINTED)))  # `talk receive` printed it
    Spool(tmp_path / "spool").deliver(record(SPOOLED))  # the follower spooled it
    marks = {e["relay_id"]: e["recovered"] for e in settled(box.entries(), arrived_ids(tmp_path))}
    assert marks == {"r-" + LOST: False, "r-" + PRINTED: True, "r-" + SPOOLED: True, "r-none": False}
    assert [e["id"] for e in box.lost()] == [LOST, None]
    assert box.count() == 4  # nothing is dropped: the blobs stay kept
