"""spool_writer.record: SpoolRecord declares every field its writers put on a spool line."""

from __future__ import annotations

from pathlib import Path

from follower.receive.sequence import Channel, Judgement, SequenceVerdict, spool_fields
from follower.tasks import mesh
from spool_writer.cursor import CursorReader
from spool_writer.record import REQUIRED, SpoolRecord, fault
from spool_writer.spool import Spool

DECLARED = set(SpoolRecord.__annotations__)
TASK = "alice-0-abcd"


def test_required_names_the_records_required_keys_once_each() -> None:
    assert len(REQUIRED) == len(set(REQUIRED))
    assert set(REQUIRED) == SpoolRecord.__required_keys__


def test_every_field_the_mesh_parser_puts_on_a_line_is_declared() -> None:
    texts = [
        mesh.task_envelope("alice", TASK, "do it", env="linux"),
        mesh.result_block(TASK, "done", "all of it", ["a.txt"]),
        mesh.question_block(TASK, "which one?", ["this", "that"]),
        f"[opencode-mesh-digest v1]\ntask: {TASK}\ngen: 3\nfacts:\n- one\npending: none\nrefs: x\n"
        "[/opencode-mesh-digest]",
    ]
    parsed = [mesh.parse(text) for text in texts]
    assert [p.kind for p in parsed] == ["task", "result", "question", "digest"]
    for p in parsed:
        # Other task headers are stored as mesh_<name>: open-ended, so undeclared on purpose.
        assert {k for k in p.fields if not k.startswith("mesh_")} <= DECLARED, p.kind


def test_the_receivers_sequence_findings_are_declared() -> None:
    decision = Judgement(SequenceVerdict.LATE, Channel(), skipped=2)
    assert set(spool_fields(decision)) == {"gap", "late"} <= DECLARED


def test_a_delivered_record_reads_back_with_declared_fields_only(tmp_path: Path) -> None:
    record: SpoolRecord = {"id": "m1", "from": "f" * 32, "name": "alice", "text": "hi",
                           "ts": "2024-01-01T00:00:00Z", "kind": "chat", "hops": ["e" * 32]}
    spool = Spool(tmp_path / "spool")
    assert spool.deliver(record)
    [read] = CursorReader(spool.layout.inbox, tmp_path / "cursor").take()
    assert set(read) <= DECLARED
    assert read == {**record, "received": read["received"]}


def test_fault_says_why_a_line_read_back_is_no_whole_record() -> None:
    good = {"id": "m1", "from": "f" * 32, "name": "alice", "text": "hi", "ts": "t", "kind": "chat"}
    assert fault(good) is None
    assert fault({**good, "received": "2026-01-01T00:00:00Z", "hops": "odd but unused"}) is None
    assert fault([good]) == "not a JSON object"
    assert fault({"id": "m1", "text": "hi"}) == "lacks from, name, ts, kind"
    assert fault({**good, "text": 5, "from": ["a"]}) == "from, text not text"
    assert fault({**good, "received": None}) == "received not text"
