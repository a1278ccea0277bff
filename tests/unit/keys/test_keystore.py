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


