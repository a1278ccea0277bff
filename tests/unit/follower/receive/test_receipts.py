"""follower.receive.receipts: receipt items parsed whole or refused whole, and batched per peer."""

from __future__ import annotations

import json
from typing import Any

import pytest

from follower.receive.receipts import (
    STATES,
    ReceiptBatch,
    parse_items,
    receipt_message,
    replay_highest,
    seal_all,
)
from keys.envelope import Inner, new_message
from keys.gate import MAX_REASON, Invalid
from keys.identity import Identity
from tests.unit.samples import FP_A, FP_B, FP_C, contact


def receipt_inner(items: Any) -> Inner:
    return new_message(FP_A, FP_B, "receipts", kind="receipt", receipts=items)


def test_parse_items_keeps_well_formed_items() -> None:
    inner = receipt_inner([{"ref": FP_C, "state": "spooled", "reason": ""},
                           {"ref": FP_A, "state": "refused", "reason": "no"},
                           {"ref": FP_B, "state": "held"}])
    assert parse_items(inner) == [(FP_C, "spooled", ""), (FP_A, "refused", "no"), (FP_B, "held", "")]


def test_parse_items_accepts_every_receipt_state() -> None:
    inner = receipt_inner([{"ref": FP_A, "state": s} for s in STATES])
    assert [state for _, state, _ in parse_items(inner)] == list(STATES)


def test_a_receipt_with_any_malformed_item_is_refused_whole() -> None:
    good = {"ref": FP_A, "state": "delivered", "reason": "ok"}
    bad_items = [
        {"ref": FP_B, "state": "stored"},
        {"ref": FP_B, "state": "sent"},
        {"ref": FP_B, "state": None},
        {"ref": "B" * 32, "state": "spooled"},
        {"ref": "xyz", "state": "spooled"},
        {"ref": 12, "state": "spooled"},
        {"state": "spooled"},
        {"ref": FP_B, "state": "spooled", "reason": 5},
        {"ref": FP_B, "state": "spooled", "reason": None},
        "not an item",
        [FP_B, "spooled"],
    ]
    assert parse_items(receipt_inner([good])) == [(FP_A, "delivered", "ok")]
    for bad in bad_items:
        inner = receipt_inner([bad, good])
        assert parse_items(inner) == []
        with pytest.raises(Invalid):  # and the gate refuses the whole message on arrival
            Inner.from_json(inner.to_json())


def test_parse_items_truncates_long_reasons() -> None:
    inner = receipt_inner([{"ref": FP_A, "state": "refused", "reason": "r" * (MAX_REASON * 3)}])
    [(_, _, reason)] = parse_items(inner)
    assert reason == "r" * MAX_REASON


def test_parse_items_of_receipts_that_are_not_a_list_is_empty() -> None:
    for raw in ({"ref": FP_A, "state": "spooled"}, "spooled", None, 3):
        assert parse_items(receipt_inner(raw)) == []
    assert parse_items(new_message(FP_A, FP_B, "no receipts here", kind="receipt")) == []


def test_receipt_message_survives_the_wire_format() -> None:
    me, peer = Identity.generate("alice"), contact("bob")
    items = [{"ref": FP_A, "state": "spooled", "reason": ""}]
    inner = receipt_message(me, peer, items)
    again = Inner.from_json(json.loads(json.dumps(inner.to_json())))
    assert (again.kind, again.sender, again.recipient) == ("receipt", me.fingerprint, peer.fingerprint)
    assert parse_items(again) == [(FP_A, "spooled", "")]


def test_receipt_batch_groups_by_peer_and_counts_items() -> None:
    batch = ReceiptBatch()
    assert len(batch) == 0
    bob, carol = contact("bob"), contact("carol")
    batch.add(bob, FP_A, "spooled")
    batch.add(bob, FP_B, "held", "h" * (MAX_REASON + 10))
    batch.add(carol, FP_C, "duplicate", "already received")
    assert len(batch) == 3
    assert set(batch.pending) == {bob.fingerprint, carol.fingerprint}
    peer, items = batch.pending[bob.fingerprint]
    assert peer == bob
    assert items == [{"ref": FP_A, "state": "spooled", "reason": ""},
                     {"ref": FP_B, "state": "held", "reason": "h" * MAX_REASON}]
    assert batch.pending[carol.fingerprint][1] == [
        {"ref": FP_C, "state": "duplicate", "reason": "already received"}]




def test_a_peer_whose_first_batch_is_due_gets_all_its_receipts_in_one_and_the_others_wait() -> None:
    pauses = iter([0.0, 60.0, 60.0])
    batch = ReceiptBatch(delay=lambda: next(pauses))
    me, bob, carol = Identity.generate("alice"), contact("bob"), contact("carol")
    for who, ref in ((bob, FP_A), (carol, FP_B), (bob, FP_C)):
        batch.add(who, ref, "spooled")
        batch.flush(me, None)  # type: ignore[arg-type]
    due = batch.take_due()
    # bob's second batch rides with his first; carol's pause is not over: hers waits.
    assert [(d.contact.name, [i["ref"] for i in d.items], d.answer) for d in due] == [
        ("bob", [FP_A, FP_C], None)]
    assert batch.take_due() == []
    assert batch.next_due() is not None
    assert [(d.contact.name, [i["ref"] for i in d.items]) for d in batch.take_due(everything=True)] == [
        ("carol", [FP_B])]
    assert batch.next_due() is None


def test_a_refusal_of_a_reused_number_carries_the_highest_seen_through_the_gate() -> None:
    batch = ReceiptBatch()
    bob = contact("bob")
    batch.add(bob, FP_A, "refused", "a replay", highest=40)
    batch.add(bob, FP_C, "delivered")
    [(_, items)] = batch.pending.values()
    arrived = Inner.from_json(receipt_inner(items).to_json())
    assert replay_highest(arrived) == {FP_A: 40}
    assert parse_items(arrived) == [(FP_A, "refused", "a replay"), (FP_C, "delivered", "")]
    assert "highest" not in items[1]  # an item says it only where it applies


@pytest.mark.parametrize("highest", [0, -1, 2**53 + 1, True, 4.0, "40", None, [40]])
def test_a_highest_that_is_no_bounded_positive_integer_refuses_the_whole_receipt(highest: object) -> None:
    inner = receipt_inner([{"ref": FP_A, "state": "refused", "reason": "r", "highest": highest},
                           {"ref": FP_B, "state": "delivered"}])
    assert parse_items(inner) == [] and replay_highest(inner) == {}
    with pytest.raises(Invalid, match="highest"):
        Inner.from_json(inner.to_json())


def test_a_highest_named_on_anything_but_a_refusal_is_not_read_as_one() -> None:
    inner = receipt_inner([{"ref": FP_A, "state": "delivered", "highest": 7}])
    assert replay_highest(inner) == {} and parse_items(inner) == [(FP_A, "delivered", "")]


def test_a_peer_whose_pre_key_messages_opened_is_answered_once_in_its_next_receipt(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import follower.receive.receipts as receipts_mod

    went: list[tuple[str, Any]] = []
    def seal(identity: Identity, peer: Any, items: Any, answer: Any = None) -> list[Any]:
        went.append((peer.name, answer))
        return []

    monkeypatch.setattr(receipts_mod, "seal_receipts", seal)
    made: list[str] = []

    def answer(peer: Any) -> dict[str, Any]:
        made.append(peer.name)  # a ratchet step: only for a receipt that goes
        return {"type": 1, "body": "QUJD"}

    batch = ReceiptBatch(answer=answer, delay=lambda: 0.0)
    me, bob, carol = Identity.generate("alice"), contact("bob"), contact("carol")
    batch.answer_session(bob)
    batch.add(carol, FP_C, "spooled")
    batch.flush(me, None)  # type: ignore[arg-type]
    seal_all(me, batch.take_due(everything=True))
    assert went == [("carol", None)] and made == []  # bob's answer waits for a receipt to bob
    batch.add(bob, FP_A, "spooled")
    batch.flush(me, None)  # type: ignore[arg-type]
    assert made == []  # queued: the step is taken as the receipt goes
    seal_all(me, batch.take_due(everything=True))
    batch.add(bob, FP_B, "spooled")
    batch.flush(me, None)  # type: ignore[arg-type]
    seal_all(me, batch.take_due(everything=True))
    assert went[1:] == [("bob", {"type": 1, "body": "QUJD"}), ("bob", None)] and made == ["bob"]
