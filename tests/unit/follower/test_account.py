"""follower.account: one identity's client side, built in one place."""

from __future__ import annotations

from pathlib import Path

from follower.account import Account, Sent
from keys import keystore
from keys.identity import Identity


def _account(tmp_path: Path, calls: list[int]) -> Account:
    identity = Identity.generate("alice")
    folder = keystore.create(tmp_path, identity, None, "http://127.0.0.1:9")

    def passphrase() -> bytes | None:
        calls.append(1)
        return None

    return Account(keystore.load(folder), "http://127.0.0.1:9", passphrase)


def test_the_passphrase_is_read_once_and_only_when_the_keys_are_used(tmp_path: Path) -> None:
    calls: list[int] = []
    account = _account(tmp_path, calls)
    assert account.contacts.all() == [] and account.name == "alice"
    assert calls == []
    assert account.identity().fingerprint == account.record.fingerprint
    account.identity()
    assert calls == [1]


def test_the_receiver_is_built_from_the_accounts_parts(tmp_path: Path) -> None:
    account = _account(tmp_path, [])
    receiver = account.receiver()
    assert receiver.client is account.client and receiver.contacts is account.contacts
    assert receiver.invites is account.invites and receiver.handed_state == "delivered"


def test_a_sent_report_names_task_and_hops_only_when_given() -> None:
    assert Sent("m1", "bob", "stored").report() == {"id": "m1", "to": "bob", "state": "stored"}
    full = Sent("m1", "bob", "queued", task="T1", hops=["fp"], warning="queued")
    assert full.queued
    assert full.report() == {"id": "m1", "to": "bob", "state": "queued", "hops": ["fp"], "task": "T1"}


def test_the_receiver_keeps_the_receipt_batch_it_is_given_even_empty(tmp_path: Path) -> None:
    from follower.receive.receipts import ReceiptBatch

    batch = ReceiptBatch(delay=lambda: 0.3)
    assert len(batch) == 0
    assert _account(tmp_path, []).receiver(receipts=batch).receipts is batch
