"""keys.ratchet.account: the Olm account per identity, sealed at rest and shared by processes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from durable.errors import UserError
from keys.identity import Identity
from keys.ratchet.account import (
    ACCOUNT_FILE,
    RatchetAccount,
    card_for,
    key_id,
    new_fallback_key,
    unpublished_keys,
)
from keys.ratchet.card import KeyKind, verify_card, verify_key
from tests.unit.samples import secret_forms

ROOT = Path(__file__).resolve().parents[3]


def test_created_on_first_use_and_the_same_account_after(tmp_path: Path, alice_id: Identity) -> None:
    first = RatchetAccount(tmp_path, alice_id).read()
    assert (tmp_path / ACCOUNT_FILE).exists()
    again = RatchetAccount(tmp_path, alice_id).read()
    assert again.curve25519_key == first.curve25519_key
    assert (tmp_path / ACCOUNT_FILE).stat().st_mode & 0o777 == 0o600


def test_the_file_holds_no_secret_in_clear(tmp_path: Path, alice_id: Identity) -> None:
    with RatchetAccount(tmp_path, alice_id).changing() as account:
        account.generate_one_time_keys(3)
    data = (tmp_path / ACCOUNT_FILE).read_bytes()
    for form in secret_forms(alice_id):
        assert form not in data
    pickle = json.loads(data)["account"]
    assert account.curve25519_key.to_base64() not in pickle  # even the public keys are sealed


def test_another_identitys_keys_cannot_open_it(tmp_path: Path, alice_id: Identity, bob_id: Identity) -> None:
    RatchetAccount(tmp_path, alice_id).read()
    with pytest.raises(UserError, match="cannot be opened with this identity's keys"):
        RatchetAccount(tmp_path, bob_id).read()


@pytest.mark.parametrize("content", [b"{}", b"[1]", b'{"v": 1, "account": "AAAA"}', b'{"v": 2}'])
def test_a_damaged_file_is_one_clear_error(tmp_path: Path, alice_id: Identity, content: bytes) -> None:
    (tmp_path / ACCOUNT_FILE).write_bytes(content)
    with pytest.raises(UserError, match="move it aside"):
        RatchetAccount(tmp_path, alice_id).read()


def test_a_change_that_fails_is_not_saved(tmp_path: Path, alice_id: Identity) -> None:
    store = RatchetAccount(tmp_path, alice_id)
    store.read()
    with pytest.raises(RuntimeError), store.changing() as account:
        account.generate_one_time_keys(5)
        raise RuntimeError("interrupted")
    assert store.read().one_time_keys == {}


def test_unpublished_keys_are_signed_for_the_wire(tmp_path: Path, alice_id: Identity) -> None:
    with RatchetAccount(tmp_path, alice_id).changing() as account:
        account.generate_one_time_keys(3)
        new_fallback_key(account)
    fp = alice_id.fingerprint
    card = verify_card(card_for(account, alice_id).to_json(), fp, alice_id.sign_public)
    assert card.curve25519 == account.curve25519_key.to_bytes()
    fallback, one_time = unpublished_keys(account, alice_id)
    assert fallback is not None and [k.key_id for k in one_time] == [0, 1, 2]
    assert verify_key(KeyKind.FALLBACK, fallback.to_json(), fp, alice_id.sign_public) == fallback
    for key in one_time:
        assert verify_key(KeyKind.ONE_TIME, key.to_json(), fp, alice_id.sign_public) == key
    account.mark_keys_as_published()
    assert unpublished_keys(account, alice_id) == (None, [])


def test_key_ids_read_as_the_counter() -> None:
    assert key_id("AAAAAAAAAAA") == 0 and key_id("AAAAAAAAAAI") == 2 and key_id("AAAAAAAAAQA") == 256


WORKER = """
import sys
from pathlib import Path
from keys.identity import Identity
from keys.ratchet.account import RatchetAccount
identity = Identity.from_secret("alice", bytes.fromhex(sys.stdin.read()))
store = RatchetAccount(Path(sys.argv[1]), identity)
for _ in range(int(sys.argv[2])):
    with store.changing() as account:
        account.generate_one_time_keys(1)
"""


def test_processes_sharing_the_account_lose_no_change(tmp_path: Path, alice_id: Identity) -> None:
    """Four processes each add keys one at a time: a lost update would lose keys."""
    workers = [subprocess.Popen([sys.executable, "-c", WORKER, str(tmp_path), "10"], cwd=ROOT,
                                stdin=subprocess.PIPE, text=True) for _ in range(4)]
    for worker in workers:
        assert worker.stdin is not None
        worker.stdin.write(alice_id.secret_bytes().hex())
        worker.stdin.close()
    assert [w.wait(timeout=120) for w in workers] == [0, 0, 0, 0]
    assert len(RatchetAccount(tmp_path, alice_id).read().one_time_keys) == 40


def _unsealing(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """A count of the times the account's pickle is unsealed."""
    import vodozemac

    calls: list[int] = []
    real = vodozemac.Account.from_pickle

    def counted(pickle: str, key: bytes) -> vodozemac.Account:
        calls.append(1)
        return real(pickle, key)

    monkeypatch.setattr(vodozemac.Account, "from_pickle", counted)
    return calls


def test_the_card_is_read_without_unsealing_the_account(
    tmp_path: Path, alice_id: Identity, monkeypatch: pytest.MonkeyPatch
) -> None:
    expected = card_for(RatchetAccount(tmp_path, alice_id).read(), alice_id)
    unsealed = _unsealing(monkeypatch)
    for _ in range(3):
        assert RatchetAccount(tmp_path, alice_id).card() == expected
    assert unsealed == []


def test_the_card_follows_an_account_made_anew(tmp_path: Path, alice_id: Identity) -> None:
    store = RatchetAccount(tmp_path, alice_id)
    first = store.card()
    (tmp_path / ACCOUNT_FILE).unlink()  # reset: a new account, with new identity keys
    second = store.card()
    assert second != first
    assert second == card_for(store.read(), alice_id)


def test_the_card_is_read_again_once_the_account_file_changes(
    tmp_path: Path, alice_id: Identity, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = RatchetAccount(tmp_path, alice_id)
    store.card()
    with store.changing() as account:  # one-time keys made for publication: the file is replaced
        account.generate_one_time_keys(2)
    stored = json.loads((tmp_path / ACCOUNT_FILE).read_text())
    stored["card"]["sig"] = "A" * 86 + "=="  # the next read must come from the file, checked
    (tmp_path / ACCOUNT_FILE).write_text(json.dumps(stored))
    unsealed = _unsealing(monkeypatch)
    assert store.card() == card_for(account, alice_id)
    assert unsealed == [1]  # a card that fails its check is made again from the account


def test_a_file_from_before_cards_were_stored_gives_the_card(tmp_path: Path, alice_id: Identity) -> None:
    store = RatchetAccount(tmp_path, alice_id)
    account = store.read()
    stored = json.loads((tmp_path / ACCOUNT_FILE).read_text())
    del stored["card"]
    (tmp_path / ACCOUNT_FILE).write_text(json.dumps(stored))
    assert store.card() == card_for(account, alice_id)
    verify_card(store.card().to_json(), alice_id.fingerprint, alice_id.sign_public)
