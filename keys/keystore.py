"""Private keys at rest, one folder per identity under TALK_HOME.

`identity.json` holds the public keys, the saved relay and the private bytes (signing seed, box
key, ML-KEM seed: 128), either encrypted (argon2id → SecretBox) or, with `--no-passphrase`, in
clear in a 0600 file. An identity made before ML-KEM keys holds 64 bytes; its first unlock adds
a KEM seed and stores it as the others, under the same derived key (one KDF per unlock still),
so the upgrade asks nothing of its user.
The KDF cost is stored with each file so it can be raised later without breaking old ones.
Argon2id at 3 passes over 32 MiB costs ~40 ms here: above OWASP's minimum, and cheap enough
that `talk send` stays quick.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, NamedTuple

from nacl.exceptions import CryptoError

from durable.errors import NotFound, UserError
from durable.files import ensure_private_dir, read_json, write_json
from durable.home import IDENTITY_FILE, identity_names
from durable.home import talk_home as default_home
from durable.locks import locked
from keys.encoding import b64d, b64e
from keys.identity import Identity, fingerprint
from keys.names import check_name
from keys.sodium import SecretBox

__all__ = ["IdentityRecord", "choose_identity", "create", "has_kem", "list_identities", "load",
           "read_passphrase_file", "talk_home", "unlock", "unlock_with_key", "unlocking_key"]

OPSLIMIT = 3
UPGRADE_LOCK = "identity.lock"
MEMLIMIT = 32 * 1024 * 1024


class IdentityRecord(NamedTuple):
    """What can be read without the passphrase."""

    folder: Path
    name: str
    fingerprint: str
    sign_key: bytes
    box_key: bytes
    relay: str
    protected: bool
    raw: dict[str, Any]


def talk_home(env_home: str | None = None) -> Path:
    return Path(env_home or default_home(os.environ))


def list_identities(folder: Path) -> list[str]:
    return identity_names(str(folder))


def choose_identity(home: Path, user: str | None) -> str:
    """`-u NAME` / TALK_USER wins; otherwise the only identity there is."""
    names = list_identities(home)
    if user:
        if user not in names:
            raise NotFound(f"no identity {user!r} in {home}; create it with `talk init {user}`")
        return user
    if len(names) == 1:
        return names[0]
    if not names:
        raise NotFound(f"no identity in {home}; create one with `talk init NAME`")
    raise UserError(f"several identities in {home} ({', '.join(names)}): pick one with -u NAME")


def read_passphrase_file(path: str) -> bytes:
    """The passphrase is the file's content, less one trailing newline; never empty."""
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise UserError(f"cannot read passphrase file {path}: {exc.strerror}") from exc
    if data.endswith(b"\n"):
        data = data[:-1]
    if not data:
        raise UserError(f"passphrase file {path} is empty; put the passphrase in it")
    return data


def _derive(passphrase: bytes, salt: bytes, opslimit: int, memlimit: int) -> bytes:
    from nacl import pwhash  # only a protected identity's unlock needs it

    return bytes(
        pwhash.argon2id.kdf(SecretBox.KEY_SIZE, passphrase, salt, opslimit, memlimit)
    )


def protect(secret_bytes: bytes, passphrase: bytes | None) -> dict[str, Any]:
    if passphrase is None:
        return {"protection": "none", "secret": b64e(secret_bytes)}
    from nacl import pwhash

    salt = os.urandom(pwhash.argon2id.SALTBYTES)
    key = _derive(passphrase, salt, OPSLIMIT, MEMLIMIT)
    sealed = SecretBox(key).encrypt(secret_bytes)
    return {
        "protection": "argon2id-secretbox",
        "opslimit": OPSLIMIT,
        "memlimit": MEMLIMIT,
        "salt": b64e(salt),
        "secret": b64e(bytes(sealed)),
    }


def _secret(stored: dict[str, Any], key: bytes | None, name: str) -> bytes:
    """The private bytes of `stored`, opened by `key` (None: stored in clear)."""
    if key is None:
        secret_bytes = b64d(stored["secret"])
        if len(secret_bytes) not in (64, 128):
            raise ValueError(f"expected 64 or 128 private bytes, got {len(secret_bytes)}")
        return secret_bytes
    return _open(stored, key, name)


def _reprotected(stored: dict[str, Any], key: bytes | None, secret_bytes: bytes) -> dict[str, Any]:
    """`stored` holding `secret_bytes` instead, under the same protection and derived key."""
    if key is None:
        return {**stored, "secret": b64e(secret_bytes)}
    return {**stored, "secret": b64e(bytes(SecretBox(key).encrypt(secret_bytes)))}


def derive_key(stored: dict[str, Any], passphrase: bytes | None, name: str) -> bytes:
    """The key `passphrase` derives for a protected identity's `stored` secret: the KDF, the
    slow part of an unlock (what the follower holds after `talk unlock`). Unchecked: `_open`
    tells a wrong one.

    Raises:
        UserError: no passphrase was given.
    """
    if passphrase is None:
        raise UserError(
            f"identity {name!r} is protected by a passphrase: pass --passphrase-file PATH "
            "or set TALK_PASSPHRASE_FILE"
        )
    return _derive(passphrase, b64d(stored["salt"]), int(stored["opslimit"]), int(stored["memlimit"]))


def _open(stored: dict[str, Any], key: bytes, name: str) -> bytes:
    try:
        return bytes(SecretBox(key).decrypt(b64d(stored["secret"])))
    except CryptoError as exc:
        raise UserError(
            f"wrong passphrase for identity {name!r}: check the file given by "
            "--passphrase-file or TALK_PASSPHRASE_FILE"
        ) from exc


def create(home: Path, identity: Identity, passphrase: bytes | None, relay: str) -> Path:
    folder = home / check_name(identity.name)
    if (folder / IDENTITY_FILE).exists():
        raise UserError(f"identity {identity.name!r} already exists in {home}; pick another name")
    ensure_private_dir(home, "TALK_HOME", follow=True)
    ensure_private_dir(folder, "identity folder")
    write_json(
        folder / IDENTITY_FILE,
        {
            "v": 1,
            "name": identity.name,
            "fingerprint": identity.fingerprint,
            "sign_key": b64e(identity.sign_public),
            "box_key": b64e(identity.box_public),
            "relay": relay,
            "private": protect(identity.stored_bytes(), passphrase),
        },
    )
    return folder


def load(folder: Path) -> IdentityRecord:
    raw = read_json(folder / IDENTITY_FILE, None)
    if not isinstance(raw, dict):
        raise NotFound(f"no identity in {folder}; create one with `talk init NAME`")
    try:
        sign_key, box_key = b64d(raw["sign_key"], 32), b64d(raw["box_key"], 32)
        record = IdentityRecord(
            folder=folder,
            name=str(raw["name"]),
            fingerprint=str(raw["fingerprint"]),
            sign_key=sign_key,
            box_key=box_key,
            relay=str(raw.get("relay") or ""),
            protected=raw["private"].get("protection") != "none",
            raw=raw,
        )
    except (KeyError, ValueError, AttributeError) as exc:
        raise UserError(f"{folder / IDENTITY_FILE} is damaged ({exc}); restore it from a backup") from exc
    if fingerprint(sign_key, box_key) != record.fingerprint:
        raise UserError(f"{folder / IDENTITY_FILE} is damaged: its keys do not match its fingerprint")
    return record


def unlock(record: IdentityRecord, passphrase: bytes | None) -> Identity:
    """The private keys of `record`.

    Raises:
        UserError: the passphrase is missing or wrong, or the identity file is damaged.
    """
    stored = record.raw["private"]
    key = None if stored.get("protection") == "none" else derive_key(stored, passphrase, record.name)
    return _identity(record, _secret(stored, key, record.name), key)


def unlocking_key(record: IdentityRecord, passphrase: bytes | None) -> bytes:
    """The key `passphrase` derives for protected `record`, checked: it opens the keys.

    Raises:
        UserError: the passphrase is missing or wrong.
    """
    key = derive_key(record.raw["private"], passphrase, record.name)
    _open(record.raw["private"], key, record.name)
    return key


def unlock_with_key(record: IdentityRecord, key: bytes) -> Identity:
    """The private keys of protected `record`, opened by a key `unlocking_key` gave.

    Raises:
        UserError: the key does not open them (the identity file changed since), or it is damaged.
    """
    return _identity(record, _open(record.raw["private"], key, record.name), key)


def _identity(record: IdentityRecord, secret_bytes: bytes, key: bytes | None) -> Identity:
    identity = Identity.from_secret(record.name, secret_bytes)
    if identity.fingerprint != record.fingerprint:
        raise UserError(f"{record.folder / IDENTITY_FILE} is damaged: private and public keys differ")
    return identity if identity.kem_seed is not None else _with_kem(record, identity, key)


def _with_kem(record: IdentityRecord, identity: Identity, key: bytes | None) -> Identity:
    """`identity` (made before KEM keys) with a KEM seed, stored before it is returned. Two
    processes upgrading at once agree: the second finds and keeps the first one's seed.

    Raises:
        UserError: the identity file changed into one `key` does not open.
    """
    # A lock of its own: an unlock may come inside another change of the folder (`folder_locked`).
    with locked(record.folder / UPGRADE_LOCK):
        raw = read_json(record.folder / IDENTITY_FILE, None)
        raw = raw if isinstance(raw, dict) else record.raw
        stored = raw["private"]
        again = Identity.from_secret(record.name, _secret(stored, key, record.name))
        if again.kem_seed is not None and again.fingerprint == identity.fingerprint:
            return again
        upgraded = identity.with_kem()
        write_json(record.folder / IDENTITY_FILE,
                   {**raw, "private": _reprotected(stored, key, upgraded.stored_bytes())})
    return upgraded


def has_kem(record: IdentityRecord) -> bool:
    """Whether `record` already holds a KEM seed (so unlocking it writes nothing), read without
    opening it: 128 private bytes, in clear or sealed, are longer than 64 in base64."""
    sealed = b64d(record.raw["private"]["secret"])
    return len(sealed) - (0 if record.raw["private"].get("protection") == "none" else 40) > 64


