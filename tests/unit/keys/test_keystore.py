"""keys.keystore: secret keys at rest, with a passphrase or owner-only."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from durable.errors import (
    UserError,
)
from durable.home import IDENTITY_FILE
from keys import keystore
from keys.encoding import b64e
from keys.identity import Identity
from tests.unit.samples import secret_forms


def test_keystore_with_passphrase_keeps_no_secret_in_clear(tmp_path: Path) -> None:
    identity = Identity.generate("alice")
    folder = keystore.create(tmp_path, identity, b"correct horse", "http://127.0.0.1:1")
    data = (folder / IDENTITY_FILE).read_bytes()
    for form in secret_forms(identity):
        assert form not in data
    stored = json.loads(data)
    assert stored["private"]["protection"] == "argon2id-secretbox"
    assert stored["fingerprint"] == identity.fingerprint

    record = keystore.load(folder)
    assert record.protected
    with pytest.raises(UserError, match="wrong passphrase"):
        keystore.unlock(record, b"correct horsf")
    with pytest.raises(UserError, match="protected by a passphrase"):
        keystore.unlock(record, None)
    unlocked = keystore.unlock(record, b"correct horse")
    assert unlocked.fingerprint == identity.fingerprint
    assert unlocked.secret_bytes() == identity.secret_bytes()


def test_keystore_without_passphrase_is_owner_only(tmp_path: Path) -> None:
    identity = Identity.generate("bob")
    home = tmp_path / "home"
    folder = keystore.create(home, identity, None, "http://127.0.0.1:1")
    path = folder / IDENTITY_FILE
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    record = keystore.load(folder)
    assert not record.protected
    assert keystore.unlock(record, None).fingerprint == identity.fingerprint
    with pytest.raises(UserError, match="already exists"):
        keystore.create(home, identity, None, "http://127.0.0.1:1")


def test_keystore_refuses_a_file_whose_keys_do_not_match(tmp_path: Path) -> None:
    alice_id, carol_id = Identity.generate("alice"), Identity.generate("carol")
    folder = keystore.create(tmp_path, alice_id, None, "http://127.0.0.1:1")
    path = folder / IDENTITY_FILE
    raw = json.loads(path.read_text())
    raw["box_key"] = b64e(carol_id.box_public)
    path.write_text(json.dumps(raw))
    with pytest.raises(UserError, match="damaged"):
        keystore.load(folder)


def test_passphrase_file_strips_one_newline_and_refuses_empty(tmp_path: Path) -> None:
    pfile = tmp_path / "pass"
    pfile.write_bytes(b"secret\n\n")
    assert keystore.read_passphrase_file(str(pfile)) == b"secret\n"
    pfile.write_bytes(b"\n")
    with pytest.raises(UserError, match="empty"):
        keystore.read_passphrase_file(str(pfile))




@pytest.mark.parametrize("passphrase", [b"correct horse", None])
def test_an_identity_from_before_kem_keys_gets_one_at_its_first_unlock_and_keeps_it(
        tmp_path: Path, passphrase: bytes | None) -> None:
    old = Identity.generate("alice")._replace(kem_seed=None)  # what an older talk made
    folder = keystore.create(tmp_path, old, passphrase, "http://127.0.0.1:1")
    record = keystore.load(folder)
    assert not keystore.has_kem(record)
    upgraded = keystore.unlock(record, passphrase)
    assert upgraded.kem_seed is not None and len(upgraded.kem_seed) == 64
    # Same identity: fingerprint, and the 64 bytes ratchet pickles are derived from.
    assert upgraded.fingerprint == old.fingerprint and upgraded.secret_bytes() == old.secret_bytes()
    stored = json.loads((folder / IDENTITY_FILE).read_text())
    assert stored["private"].get("protection") == ("none" if passphrase is None else "argon2id-secretbox")
    if passphrase is not None:  # the same salt, hence the same derived key: one KDF per unlock
        assert stored["private"]["salt"] == record.raw["private"]["salt"]
        assert upgraded.kem_seed not in (folder / IDENTITY_FILE).read_bytes()
    again = keystore.load(folder)
    assert keystore.has_kem(again)
    assert keystore.unlock(again, passphrase).kem_seed == upgraded.kem_seed
    # A second unlock through the old record (a process that read it before) keeps the first seed.
    assert keystore.unlock(record, passphrase).kem_seed == upgraded.kem_seed
    assert upgraded.bundle().kem_key() is not None


def test_a_new_identity_has_its_kem_key_from_the_start(tmp_path: Path) -> None:
    identity = Identity.generate("bob")
    record = keystore.load(keystore.create(tmp_path, identity, None, "http://127.0.0.1:1"))
    assert keystore.has_kem(record)
    assert keystore.unlock(record, None).kem_seed == identity.kem_seed
