"""follower.send.outbox: states only move forward whatever order receipts come in, and the log compacts."""

from __future__ import annotations

import dataclasses
import itertools
import json
import os
import stat
from pathlib import Path
from typing import Any

import pytest

import follower.send.outbox as outbox_mod
from durable.errors import NotFound, UserError
from follower.send.outbox import MAX_ATTEMPTS, PREVIEW, Entry, Outbox, advance, fold
from tests.unit.samples import FP_B, hexid


def entry(**over: Any) -> Entry:
    base: dict[str, Any] = {"id": hexid(1), "to": FP_B, "name": "bob", "kind": "chat", "text": "hi",
                            "ts": 100.0, "last_attempt": 100.0, "blob": "c2VhbGVk"}
    return Entry(**{**base, **over})


def sent_event(msg_id: str, ts: float = 100.0) -> dict[str, Any]:
    return {"ev": "sent", "id": msg_id, "to": FP_B, "name": "bob", "kind": "chat", "text": "hi",
            "ts": ts, "tag": "t", "blob": "c2VhbGVk", "extra": {}}


def receipt_event(msg_id: str, state: str, ts: float, reason: str = "") -> dict[str, Any]:
    return {"ev": "receipt", "id": msg_id, "state": state, "reason": reason, "ts": ts}


def test_advance_moves_a_state_forward_and_records_reason_and_time() -> None:
    e = entry()
    advance(e, "spooled", "in the spool", 150.0)
    assert (e.state, e.reason, e.updated) == ("spooled", "in the spool", 150.0)


def test_advance_never_moves_a_state_back_or_sideways() -> None:
    e = entry(state="delivered", reason="read", updated=200.0)
    for state in ("sent", "stored", "held", "spooled", "delivered", "refused"):
        advance(e, state, "late", 300.0)
    assert (e.state, e.reason, e.updated) == ("delivered", "read", 200.0)


def test_advance_ignores_unknown_states() -> None:
    e = entry(state="stored")
    advance(e, "teleported", "?", 300.0)
    assert e.state == "stored"


def test_duplicate_counts_as_spooled_with_a_default_reason() -> None:
    e = entry()
    advance(e, "duplicate", "", 120.0)
    assert (e.state, e.reason) == ("spooled", "the peer already had it")
    given = entry()
    advance(given, "duplicate", "already received", 120.0)
    assert (given.state, given.reason) == ("spooled", "already received")


def test_duplicate_does_not_undo_a_delivery() -> None:
    e = entry(state="delivered")
    advance(e, "duplicate", "", 120.0)
    assert e.state == "delivered"


def test_final_refusal_does_not_override_spooled_or_delivered() -> None:
    for reached in ("spooled", "delivered"):
        for final in ("refused", "expired", "dropped"):
            e = entry(state=reached)
            advance(e, final, "no", 500.0)
            assert e.state == reached


def test_refusal_after_held_is_taken() -> None:
    e = entry(state="held")
    advance(e, "refused", "the recipient does not accept messages from you", 500.0)
    assert (e.state, e.reason) == ("refused", "the recipient does not accept messages from you")


def test_fold_reaches_the_same_state_whatever_order_receipts_come_in() -> None:
    msg = hexid(1)
    receipts = [receipt_event(msg, s, 110.0 + i) for i, s in
                enumerate(("held", "spooled", "delivered", "duplicate", "refused"))]
    stored = {"ev": "stored", "id": msg, "state": "stored", "ts": 105.0}
    finals = {fold([sent_event(msg), *order])[msg].state
              for order in itertools.permutations([stored, *receipts])}
    assert finals == {"delivered"}


def test_fold_spooled_and_refused_in_either_order_end_spooled() -> None:
    msg = hexid(1)
    one = fold([sent_event(msg), receipt_event(msg, "spooled", 1), receipt_event(msg, "refused", 2)])
    two = fold([sent_event(msg), receipt_event(msg, "refused", 1), receipt_event(msg, "spooled", 2)])
    assert one[msg].state == two[msg].state == "spooled"


def test_fold_ignores_events_for_unknown_messages_and_ids_that_are_not_strings() -> None:
    msg = hexid(1)
    entries = fold([receipt_event(hexid(9), "delivered", 1.0), {"ev": "sent", "id": 7},
                    {"ev": "sent"}, sent_event(msg), {"ev": "resent", "id": hexid(9), "ts": 3.0}])
    assert list(entries) == [msg]
    assert entries[msg].state == "sent"


def test_fold_counts_resends_and_remembers_the_last_attempt() -> None:
    msg = hexid(1)
    entries = fold([sent_event(msg, ts=100.0), {"ev": "resent", "id": msg, "ts": 130.0},
                    {"ev": "resent", "id": msg, "ts": 190.0}])
    assert (entries[msg].attempts, entries[msg].last_attempt) == (3, 190.0)


def test_fold_takes_the_first_sent_event_of_an_id() -> None:
    msg = hexid(1)
    again = {**sent_event(msg, ts=999.0), "text": "other"}
    entries = fold([sent_event(msg, ts=100.0), again])
    assert (entries[msg].ts, entries[msg].text) == (100.0, "hi")


def test_fold_into_known_entries_applies_only_the_new_events() -> None:
    known = fold([sent_event(hexid(1))])
    same = fold([receipt_event(hexid(1), "spooled", 150.0), sent_event(hexid(2), 160.0)], known)
    assert same is known and {i: e.state for i, e in known.items()} == {hexid(1): "spooled", hexid(2): "sent"}


def test_a_snapshot_of_a_known_message_only_moves_it_forward() -> None:
    known = fold([sent_event(hexid(1)), receipt_event(hexid(1), "spooled", 150.0)])
    snapshot = {**dataclasses.asdict(entry(state="delivered", updated=170.0)), "ev": "entry"}
    fold([snapshot], known)
    assert (known[hexid(1)].state, known[hexid(1)].updated) == ("delivered", 170.0)
    fold([{**snapshot, "state": "stored", "updated": 180.0}], known)
    assert known[hexid(1)].state == "delivered"


def test_fold_starts_last_attempt_and_updated_at_the_send_time() -> None:
    msg = hexid(1)
    e = fold([{"ev": "sent", "id": msg, "ts": 42.0}])[msg]
    assert (e.last_attempt, e.updated, e.attempts, e.state, e.kind) == (42.0, 42.0, 1, "sent", "chat")


def test_resend_backoff_doubles_with_each_attempt() -> None:
    after = 30.0
    for attempts, backoff in ((1, 30.0), (2, 60.0), (3, 120.0), (4, 240.0)):
        e = entry(attempts=attempts, last_attempt=1000.0)
        assert not e.resend_due(1000.0 + backoff - 0.5, after)
        assert e.resend_due(1000.0 + backoff, after)


def test_resend_stops_at_max_attempts() -> None:
    far = 10.0**9
    assert entry(attempts=MAX_ATTEMPTS - 1, last_attempt=0.0).resend_due(far, 30.0)
    assert not entry(attempts=MAX_ATTEMPTS, last_attempt=0.0).resend_due(far, 30.0)
    assert not entry(attempts=MAX_ATTEMPTS + 3, last_attempt=0.0).resend_due(far, 30.0)


def test_resend_is_due_only_while_waiting_for_a_receipt_and_with_a_blob() -> None:
    far = 10.0**9
    assert entry(state="sent").resend_due(far, 30.0)
    assert entry(state="stored").resend_due(far, 30.0)
    for state in ("held", "spooled", "delivered", "refused", "expired", "dropped"):
        assert not entry(state=state).resend_due(far, 30.0)
    assert not entry(blob="").resend_due(far, 30.0)


def test_public_shows_no_ciphertext_and_merges_extra_under_the_entry_fields() -> None:
    e = entry(tag="secret-tag", blob="secret-blob", extra={"task": "T1", "state": "forged"})
    shown = e.public()
    assert not {"tag", "blob", "extra"} & set(shown)
    assert shown["task"] == "T1"
    assert shown["state"] == "sent"
    assert shown["id"] == hexid(1)
    assert "secret-blob" not in json.dumps(shown)


# follower.send.outbox: the Outbox log in a folder


def send_one(box: Outbox, n: int, text: str = "hi", **extra: Any) -> str:
    msg = hexid(n)
    box.sent(msg, FP_B, "bob", "chat", text, f"tag{n}", f"blob{n}", **extra)
    return msg


def test_an_empty_outbox_has_no_entries(tmp_path: Path) -> None:
    box = Outbox(tmp_path)
    assert box.entries() == {}
    assert box.find(hexid(1)) is None


def test_sent_records_the_message_with_a_short_preview_and_its_extra(tmp_path: Path) -> None:
    box = Outbox(tmp_path)
    msg = send_one(box, 1, text="x" * (PREVIEW + 50), task="T1")
    e = box.entries()[msg]
    assert (e.to, e.name, e.kind, e.state, e.attempts) == (FP_B, "bob", "chat", "sent", 1)
    assert e.text == "x" * PREVIEW
    assert (e.tag, e.blob) == ("tag1", "blob1")
    assert e.extra == {"task": "T1"}
    assert e.public()["task"] == "T1"
    assert stat.S_IMODE(os.stat(box.path).st_mode) == 0o600


def test_stored_then_receipts_move_the_message_forward(tmp_path: Path) -> None:
    box = Outbox(tmp_path)
    msg = send_one(box, 1)
    box.stored(msg)
    assert box.entries()[msg].state == "stored"
    box.receipts([(msg, "spooled", "")])
    assert box.entries()[msg].state == "spooled"
    box.receipts([(msg, "delivered", "")])
    assert box.entries()[msg].state == "delivered"


def test_outbox_states_only_move_forward_whatever_order_events_come_in(tmp_path: Path) -> None:
    box = Outbox(tmp_path)
    msg = send_one(box, 1)
    box.receipts([(msg, "delivered", "read")])
    box.receipts([(msg, "held", "wait")])
    box.stored(msg)
    box.receipts([(msg, "spooled", "")])
    e = box.entries()[msg]
    assert (e.state, e.reason) == ("delivered", "read")


def test_outbox_duplicate_receipt_counts_as_spooled(tmp_path: Path) -> None:
    box = Outbox(tmp_path)
    msg = send_one(box, 1)
    box.stored(msg)
    box.receipts([(msg, "duplicate", "already received")])
    e = box.entries()[msg]
    assert (e.state, e.reason) == ("spooled", "already received")
    assert not e.resend_due(10.0**12, 30.0)


def test_outbox_final_refusal_does_not_override_spooled(tmp_path: Path) -> None:
    box = Outbox(tmp_path)
    spooled, delivered = send_one(box, 1), send_one(box, 2)
    box.receipts([(spooled, "spooled", ""), (delivered, "delivered", "")])
    box.receipts([(spooled, "refused", "no"), (delivered, "expired", "late")])
    entries = box.entries()
    assert (entries[spooled].state, entries[delivered].state) == ("spooled", "delivered")


def test_outbox_receipts_of_several_messages_in_one_call(tmp_path: Path) -> None:
    box = Outbox(tmp_path)
    one, two = send_one(box, 1), send_one(box, 2)
    box.receipts([(one, "held", "held until the recipient accepts it"), (two, "refused", "no")])
    entries = box.entries()
    assert (entries[one].state, entries[one].reason) == ("held", "held until the recipient accepts it")
    assert (entries[two].state, entries[two].reason) == ("refused", "no")


def test_outbox_resent_counts_attempts(tmp_path: Path) -> None:
    box = Outbox(tmp_path)
    msg = send_one(box, 1)
    sent_at = box.entries()[msg].last_attempt
    box.resent(msg)
    box.resent(msg)
    e = box.entries()[msg]
    assert e.attempts == 3
    assert e.last_attempt >= sent_at


def test_outbox_find_takes_a_whole_id_and_pick_an_unambiguous_prefix(tmp_path: Path) -> None:
    box = Outbox(tmp_path)
    first = "abcdef01" + "0" * 24
    second = "abcdef02" + "0" * 24
    for msg in (first, second):
        box.sent(msg, FP_B, "bob", "chat", "hi", "t", "b")
    found = box.find(first)
    assert found is not None and found.id == first
    assert box.find("abcdef01") is None  # find is for ids the code holds whole
    assert box.pick(first).id == first
    assert box.pick("ABCDEF01").id == first
    with pytest.raises(UserError, match="ambiguous: abcdef matches 2 messages"):
        box.pick("abcdef")
    with pytest.raises(UserError, match="not a message id"):
        box.pick("abcde")  # too short, even were it unique
    with pytest.raises(NotFound, match="talk outbox"):
        box.pick("ffffff")


def test_outbox_pick_looks_for_a_prefix_in_the_history_too(tmp_path: Path) -> None:
    box = Outbox(tmp_path)
    box.sent("123456" + "0" * 26, FP_B, "bob", "chat", "hi", "t", "b")
    box.receipts([("123456" + "0" * 26, "delivered", "")])
    box._compact()  # delivered: settled, so only the history has it now
    assert "123456" + "0" * 26 not in box.entries()
    assert box.pick("123456").id.startswith("123456")


def busy_outbox(box: Outbox) -> tuple[dict[str, str], dict[str, str]]:
    """Messages in every state, with many events each: (finished by state, waiting by state)."""
    finished = {"delivered": send_one(box, 1), "spooled": send_one(box, 2), "held": send_one(box, 3),
                "refused": send_one(box, 4)}
    waiting = {"stored": send_one(box, 5), "sent": send_one(box, 6)}
    for _ in range(20):
        box.stored(finished["delivered"])
        box.resent(waiting["stored"])
        box.receipts([(msg, state, f"because {state}") for state, msg in finished.items()])
    box.stored(waiting["stored"])
    return finished, waiting


def test_outbox_compaction_moves_settled_messages_to_the_history(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    box = Outbox(tmp_path)
    finished, waiting = busy_outbox(box)
    before = box.entries()
    size_before = box.path.stat().st_size
    assert box.path.read_bytes().count(b"\n") > 6 * 5

    monkeypatch.setattr(outbox_mod, "COMPACT_BYTES", size_before // 2)
    box.resent(waiting["sent"])  # one more event crosses the (now small) limit

    # The working log: a header, then one line per message still on its way (held and spooled
    # ones too, for two days: a later receipt may still move them on).
    lines = box.path.read_bytes().splitlines()
    assert json.loads(lines[0])["ev"] == "compacted" and len(lines) == 5
    after = box.entries()
    assert set(after) == {finished["spooled"], finished["held"], *waiting.values()}
    resent = after[waiting["sent"]]
    assert resent == dataclasses.replace(before[waiting["sent"]], attempts=2,
                                         last_attempt=resent.last_attempt)
    assert after[waiting["stored"]] == before[waiting["stored"]]
    assert (after[waiting["stored"]].blob, after[waiting["stored"]].attempts) == ("blob5", 21)
    assert after[finished["held"]] == dataclasses.replace(before[finished["held"]], blob="")
    # The settled ones, delivered and refused, are in the history, without their ciphertext.
    assert box.history.read_bytes().count(b"\n") == 2
    everything = box.everything()
    for state in ("delivered", "refused"):
        msg = finished[state]
        assert everything[msg] == dataclasses.replace(before[msg], blob="") and before[msg].blob
        assert box.find(msg) == everything[msg]
    assert set(box.recent()) == set(before)


def test_held_and_spooled_messages_settle_after_two_days() -> None:
    now = 1_000_000.0
    for state in ("held", "spooled"):
        fresh = entry(state=state, updated=now - outbox_mod.SETTLE_AFTER_S + 60)
        old = entry(state=state, updated=now - outbox_mod.SETTLE_AFTER_S - 60)
        assert not fresh.settled(now) and old.settled(now)
    for state in ("sent", "stored"):  # still owed a resend: never settled by age
        assert not entry(state=state, updated=0.0).settled(now)
    for state in ("delivered", "refused", "expired", "dropped"):
        assert entry(state=state, updated=now).settled(now)


def test_many_messages_in_flight_do_not_make_every_append_rewrite_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The log compacts again only once it doubles what the last compaction left."""
    monkeypatch.setattr(outbox_mod, "COMPACT_BYTES", 1000)
    box = Outbox(tmp_path)
    compactions = 0
    compact = box._compact

    def counted() -> None:
        nonlocal compactions
        compactions += 1
        compact()

    monkeypatch.setattr(box, "_compact", counted)
    sent = [send_one(box, n, text="x" * 150) for n in range(1, 201)]  # none ever stored
    assert compactions <= 10
    assert list(box.entries()) == sent and all(e.blob for e in box.entries().values())


def test_a_crash_between_the_history_and_the_working_log_shows_each_message_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    box = Outbox(tmp_path)
    finished, _ = busy_outbox(box)
    working = box.path.read_bytes()
    box._compact()  # the history gets the settled messages...
    box.path.write_bytes(working)  # ...but the working log is not replaced (killed right then)
    box._compact()  # and the next compaction writes them to the history again
    everything = box.everything()
    assert len(everything) == 6
    assert everything[finished["delivered"]].state == "delivered"
    shown = sorted(box.recent().values(), key=lambda e: e.ts)
    assert [e.id for e in shown] == [hexid(n) for n in range(1, 7)]


def test_outbox_goes_on_folding_events_up_to_the_history(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(outbox_mod, "COMPACT_BYTES", 1)
    box = Outbox(tmp_path)
    msg = send_one(box, 1)
    box.stored(msg)
    box.resent(msg)
    box.receipts([(msg, "spooled", "")])
    box.receipts([(msg, "delivered", "read")])
    box._compact()
    assert msg not in box.entries()
    e = box.everything()[msg]
    assert (e.state, e.reason, e.attempts, e.blob) == ("delivered", "read", 2, "")


def test_outbox_ignores_a_torn_last_line(tmp_path: Path) -> None:
    box = Outbox(tmp_path)
    msg = send_one(box, 1)
    box.stored(msg)
    with open(box.path, "ab") as f:
        f.write(b'{"ev":"receipt","id":"' + msg.encode() + b'","state":"deliv')
    entries = box.entries()
    assert list(entries) == [msg]
    assert entries[msg].state == "stored"


def test_outbox_event_appended_after_a_torn_line_is_kept(tmp_path: Path) -> None:
    box = Outbox(tmp_path)
    send_one(box, 1)
    with open(box.path, "ab") as f:
        f.write(b'{"ev":"stored","id":"' + hexid(1).encode())  # a crash mid-append
    msg = send_one(box, 2)
    assert msg in box.entries()




def recovered_event(msg_id: str, ts: float) -> dict[str, Any]:
    return {"ev": "recovered", "id": msg_id, "tag": "t2", "blob": "bmV3", "ts": ts}


def test_a_message_refused_for_want_of_a_session_moves_on_once_it_is_sent_again() -> None:
    no_session = "no session: no ratchet session with this peer opens the message"
    e = fold([sent_event(hexid(1)), receipt_event(hexid(1), "refused", 110.0, no_session),
              recovered_event(hexid(1), 120.0), {"ev": "stored", "id": hexid(1), "ts": 121.0}])[hexid(1)]
    assert (e.state, e.recovered, e.blob, e.tag) == ("stored", 120.0, "bmV3", "t2")
    assert e.public()["recovered"] == 120.0 and e.resend_due(10.0**6, 30.0)
    advance(e, "delivered", "", 130.0)
    assert e.state == "delivered"


def test_a_second_refusal_after_a_recovery_is_final() -> None:
    events = [sent_event(hexid(1)), receipt_event(hexid(1), "refused", 110.0, "no session"),
              recovered_event(hexid(1), 120.0), receipt_event(hexid(1), "refused", 130.0, "no session"),
              recovered_event(hexid(1), 140.0)]
    e = fold(events)[hexid(1)]
    assert (e.state, e.recovered) == ("refused", 120.0) and not e.resend_due(10.0**6, 30.0)


def test_a_recovery_of_a_message_not_refused_changes_nothing() -> None:
    e = fold([sent_event(hexid(1)), receipt_event(hexid(1), "spooled", 110.0),
              recovered_event(hexid(1), 120.0)])[hexid(1)]
    assert (e.state, e.recovered, e.blob) == ("spooled", 0.0, "c2VhbGVk")


def test_a_recovered_entry_keeps_its_recovery_through_a_compaction() -> None:
    e = fold([sent_event(hexid(1)), receipt_event(hexid(1), "refused", 110.0, "no session"),
              recovered_event(hexid(1), 120.0)])[hexid(1)]
    again = fold([json.loads(json.dumps(e.snapshot()))])[hexid(1)]
    assert (again.state, again.recovered, again.blob) == ("sent", 120.0, "bmV3")


def sent_again(msg_id: str, ts: float, sends: int, way: str, answered: str = "r" * 32) -> dict[str, Any]:
    return {**recovered_event(msg_id, ts), "sends": sends, "way": way, "answered": answered,
            "reason": f"sent again (attempt {sends})", "blob": f"copy{sends}"}


def test_each_refusal_that_brings_a_message_back_makes_it_the_next_copy() -> None:
    events = [sent_event(hexid(1))]
    for sends, ts in ((2, 110.0), (3, 130.0), (4, 150.0)):
        events += [receipt_event(hexid(1), "refused", ts, "not opened"),
                   sent_again(hexid(1), ts + 1, sends, "same session")]
    e = fold(events)[hexid(1)]
    assert (e.state, e.sends, e.way, e.blob, e.recovered, e.attempts) == (
        "sent", 4, "same session", "copy4", 151.0, 1)
    assert e.reason == "sent again (attempt 4)" and e.resend_due(10.0**6, 30.0)
    events.append(receipt_event(hexid(1), "refused", 160.0, "refused after 4 attempts: not opened"))
    e = fold(events)[hexid(1)]
    assert (e.state, e.reason) == ("refused", "refused after 4 attempts: not opened")
    assert e.settled(170.0) and not e.resend_due(10.0**6, 30.0)


def test_a_copy_recorded_twice_moves_the_entry_once() -> None:
    e = fold([sent_event(hexid(1)), receipt_event(hexid(1), "refused", 110.0, "not opened"),
              sent_again(hexid(1), 111.0, 2, "same session"), receipt_event(hexid(1), "refused", 120.0),
              sent_again(hexid(1), 121.0, 2, "same session")])[hexid(1)]
    assert (e.state, e.sends, e.recovered) == ("refused", 2, 111.0)


def test_the_count_of_copies_survives_a_compaction() -> None:
    e = fold([sent_event(hexid(1)), receipt_event(hexid(1), "refused", 110.0, "not opened"),
              sent_again(hexid(1), 111.0, 2, "new session", answered="ab" * 16)])[hexid(1)]
    again = fold([json.loads(json.dumps(e.snapshot()))])[hexid(1)]
    assert (again.sends, again.way, again.answered, again.blob) == (2, "new session", "ab" * 16, "copy2")
