"""The Qwen door's outbox: what each of Qwen's answers does to a batch, and taking mail from a real
spool before its cursor moves. No Qwen Code runs here."""

from __future__ import annotations

import os
from pathlib import Path

from alarms.hosts.qwen import frames as f
from alarms.hosts.qwen import outbox as ob
from spool_writer import lines
from spool_writer.cursor import CursorReader
from spool_writer.layout import SpoolLayout
from spool_writer.record import SpoolRecord
from spool_writer.sessions import register
from tests.unit.samples import spool_message

SID = "8e016be8-5b48-4c13-ad22-1f5326ae64ac"


def joined(records: list[SpoolRecord]) -> str:
    return "|".join(str(r["text"]) for r in records)


def one(*ids: str, sid: str = SID) -> tuple[ob.OutboxState, ob.Batch]:
    state = ob.add(ob.OutboxState(), sid, [spool_message(i) for i in ids], joined)
    return state, state.batches[0]


def answer(state: ob.OutboxState, status: str, batch: ob.Batch, now: float = 100.0,
           **more: object) -> tuple[ob.OutboxState, list[ob.Batch]]:
    return ob.apply(state, f.QwenReceipt(status, batch.msg_id, **more), now)  # type: ignore[arg-type]


def test_a_batch_is_sent_at_once_then_again_with_the_same_id_only_without_an_answer() -> None:
    state, batch = one("a", "b")
    assert batch.text == "text of a|text of b" and ob.due(batch, 0.0)
    state = ob.sent(state, batch, 100.0)
    sent = state.batches[0]
    assert sent.msg_id == batch.msg_id and not ob.due(sent, 100.0 + ob.RECEIPT_WAIT_S - 1)
    assert ob.due(sent, 100.0 + ob.RECEIPT_WAIT_S)
    twice = ob.sent(state, sent, 111.0).batches[0]
    assert not ob.due(twice, 111.0 + ob.RECEIPT_WAIT_S) and ob.due(twice, 111.0 + 2 * ob.RECEIPT_WAIT_S)


def test_a_write_that_failed_is_tried_again_soon_under_the_same_id() -> None:
    state, batch = one("a")
    state = ob.failed(ob.sent(state, batch, 100.0), batch.msg_id, 100.0)
    again = state.batches[0]
    assert again.sends == 0 and again.msg_id == batch.msg_id
    assert not ob.due(again, 100.0 + ob.SEND_RETRY_S / 2) and ob.due(again, 100.0 + ob.SEND_RETRY_S)
    assert ob.failed(state, "talk-other", 1.0) == state


def test_delivered_is_the_only_answer_that_hands_the_batch_over() -> None:
    state, batch = one("a")
    state = ob.sent(state, batch, 1.0)
    for status in (f.HELD, f.DROPPED):
        _, queued = answer(state, status, batch)
        assert queued == []
    done, queued = answer(state, f.DELIVERED, batch)
    assert [b.ids for b in queued] == [("a",)] and done.waiting() == 0 and not ob.due(done.batches[0], 1e9)
    again, queued = answer(done, f.DELIVERED, batch)  # a repeat: no second hand-over
    assert queued == [] and again == done


def test_answers_after_delivered_and_held_follow_the_protocol() -> None:
    state, batch = one("a")
    held, _ = answer(ob.sent(state, batch, 1.0), f.HELD, batch)
    assert held.batches[0].status == f.HELD and held.waiting() == 1
    assert not ob.due(held.batches[0], 100.0 + ob.HELD_RECHECK_S - 1)
    assert ob.due(held.batches[0], 100.0 + ob.HELD_RECHECK_S)
    released, queued = answer(held, f.DELIVERED, batch)
    assert len(queued) == 1
    expired, _ = answer(released, f.EXPIRED, batch, now=200.0)  # the session quit with it unread
    again = expired.batches[0]
    assert again.status == f.PENDING and again.msg_id != batch.msg_id
    assert again.next_at == 200.0 + ob.EXPIRED_RETRY_S


def test_denied_drops_the_batch_for_good_and_refused_keeps_it_for_later() -> None:
    state, batch = one("a")
    denied, queued = answer(state, f.DENIED, batch)
    assert queued == [] and denied.batches == () and denied.recent == ("a",)
    assert denied.counts == {"denied": 1}
    refused, _ = answer(state, f.REFUSED, batch)
    kept = refused.batches[0]
    assert kept.status == f.REFUSED and kept.msg_id != batch.msg_id
    assert not ob.due(kept, 100.0 + ob.REFUSED_RETRY_S - 1) and ob.due(kept, 100.0 + ob.REFUSED_RETRY_S)


def test_misaddressed_goes_again_at_once_under_a_new_id_and_dropped_backs_off_under_the_same() -> None:
    state, batch = one("a")
    moved, _ = answer(ob.sent(state, batch, 1.0), f.MISADDRESSED, batch)
    assert moved.batches[0].msg_id != batch.msg_id and ob.due(moved.batches[0], 100.0)
    dropped, _ = answer(ob.sent(state, batch, 1.0), f.DROPPED, batch, drop_reason="rate-limited")
    back = dropped.batches[0]
    assert back.msg_id == batch.msg_id and not ob.due(back, 101.0) and ob.due(back, 102.0)


def test_a_duplicate_is_asked_again_once_qwens_dedup_window_has_passed_not_sooner() -> None:
    state, batch = one("a")
    dropped, _ = answer(ob.sent(state, batch, 1.0), f.DROPPED, batch, drop_reason="duplicate")
    back = dropped.batches[0]
    assert back.msg_id == batch.msg_id
    assert not ob.due(back, 100.0 + ob.DUPLICATE_WINDOW_S - 1) and ob.due(back, 100.0 + ob.DUPLICATE_WINDOW_S)
    delivered, queued = answer(ob.sent(dropped, back, 140.0), f.DELIVERED, back, now=140.0)
    assert delivered.waiting() == 0 and [b.ids for b in queued] == [("a",)]


def test_a_dropped_receipt_settles_every_id_it_names_and_noise_changes_nothing() -> None:
    state = ob.add(ob.OutboxState(), SID, [spool_message("a")], joined)
    big = spool_message("b")
    big["text"] = "x" * ob.MAX_BATCH_CHARS
    state = ob.add(state, SID, [big], joined)
    first, second = state.batches
    after, _ = ob.apply(state, f.QwenReceipt(f.DROPPED, first.msg_id, "queue-full", (second.msg_id,)), 5.0)
    assert all(b.drops == 1 for b in after.batches)
    assert ob.apply(state, f.QwenReceipt(f.DELIVERED, "talk-unknown"), 5.0) == (state, [])


def test_big_batches_are_split_and_a_record_already_here_is_not_taken_twice() -> None:
    records = [spool_message(i) for i in "abc"]
    for r in records:
        r["text"] = "y" * (ob.MAX_BATCH_CHARS // 2)
    state = ob.add(ob.OutboxState(), SID, records, joined)
    assert [b.ids for b in state.batches] == [("a", "b"), ("c",)]
    assert ob.add(state, SID, records, joined) == state


def test_mail_for_a_session_that_is_gone_goes_to_a_live_one_and_delivered_is_forgotten_later() -> None:
    state, batch = one("a", sid="old")
    assert ob.retarget(state, [], 1.0) == state  # no live session: it waits
    moved = ob.retarget(state, [SID], 1.0).batches[0]
    assert moved.sid == SID and moved.ids == ("a",)
    done, _ = answer(state, f.DELIVERED, batch, now=10.0)
    assert ob.retire(done, ["old"], 10.0 + ob.KEEP_DELIVERED_S - 1) == done
    assert ob.retire(done, ["old"], 10.0 + ob.KEEP_DELIVERED_S).batches == ()
    assert ob.retire(done, [], 11.0).recent == ("a",)
    assert ob.retarget(done, [SID], 11.0) == done  # delivered mail is not sent again elsewhere


def test_fill_takes_new_mail_into_the_outbox_before_the_cursor_moves(tmp_path: Path) -> None:
    layout = SpoolLayout(tmp_path / "spool")
    register(layout.root, "qwen", SID, os.getpid())
    reader = CursorReader(layout.session_file(SID), layout.cursor_file(SID))
    outbox = ob.QwenOutbox(tmp_path / "outbox.json")
    assert outbox.fill(layout, SID, outbox.load(), joined) == ob.OutboxState()
    with layout.session_file(SID).open("ab") as out:
        for i in "ab":
            out.write(lines.encode(spool_message(i)))
    state = outbox.fill(layout, SID, outbox.load(), joined)
    assert [b.ids for b in state.batches] == [("a", "b")] and outbox.load() == state
    assert reader.count_unread() == 0
    assert not layout.handed.exists() or layout.handed.read_bytes() == b""  # no receipt before Qwen's answer
    # A crash between the outbox write and the cursor save: the mail is read again, taken once.
    reader_state = layout.cursor_file(SID)
    reader_state.unlink()
    assert outbox.fill(layout, SID, state, joined) == state
    assert outbox.load() == state
    outbox.path.write_text("{\"batches\": [1]}")
    try:
        outbox.load()
    except Exception as exc:
        assert "is damaged" in str(exc) and "move it aside" in str(exc)
    else:
        raise AssertionError("a damaged outbox must say what to do")
