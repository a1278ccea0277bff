"""The identity's Olm account (vodozemac), kept beside identity.json and encrypted at rest.

File `ratchet.json` in the identity folder: {"v": 1, "account": PICKLE, "card"?: CARD}. vodozemac encrypts
and authenticates its pickle under a 32-byte key; ours is BLAKE2b-256 keyed with the
identity's 64 private bytes under a context of its own. Whoever can read identity.json's
private keys (with the passphrase, or from the 0600 file `--no-passphrase` leaves) can open
the account, and nobody else: it is exactly as protected as the identity.

Sharing. `talk receive`, the follower and the MCP server open one identity from separate
processes. Every change of the account (new keys, keys marked published, later sessions) is
load, change, save under the account's own lock (`ratchet.lock`), and the save replaces the
file atomically and durably (`durable.files.replace_file`): a reader sees the old account or
the new one, never half of one, and two writers never lose each other's change. The lock is
held only around the change itself, never across a request to the relay. It is not the
identity folder's lock because a receive holds the account from opening a pre-key message
until after the hand-over, which takes that lock (the task ledger, held mail), and a send
starts a session while it holds that lock to number the message.

The card. Every save also writes the account's public card (`keys.ratchet.card`), signed, beside
the pickle: a sender's pre-key messages carry it, and reading it must not cost unsealing the
whole account (about a fifth of a library send). The card changes only when the account does
(a new account after a reset; new one-time or fallback keys change the pickle, not the card,
but every save writes it again all the same), so `card` reads it once per process and file
(the file's inode, size and change time tell a replaced file), checks it against this identity's
signing key, and unseals the account only for a file written before cards were stored beside it.
"""

from __future__ import annotations

import base64
import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import vodozemac

from durable.digests import blake2b
from durable.errors import UserError
from durable.files import read_json, write_json
from durable.locks import locked
from durable.parsed_file import Signature, signature
from keys.identity import Identity
from keys.ratchet.card import (
    KeyKind,
    RatchetCard,
    RatchetKeyError,
    SignedKey,
    sign_card,
    sign_key,
    verify_card,
)

__all__ = [
    "ACCOUNT_FILE",
    "RatchetAccount",
    "card_for",
    "fallback_keys",
    "key_id",
    "new_fallback_key",
    "pickle_key",
    "unpublished_keys",
]

ACCOUNT_FILE = "ratchet.json"
ACCOUNT_LOCK = "ratchet.lock"
PICKLE_CONTEXT = b"talk-ratchet-account-pickle-v1"


def pickle_key(identity: Identity) -> bytes:
    """The key the account's pickle is sealed under, derived from the identity's private keys."""
    return blake2b(PICKLE_CONTEXT, key=identity.secret_bytes(), digest_size=32).digest()


def _unpadded(text: str) -> bytes:
    """vodozemac writes base64 without padding."""
    return base64.b64decode(text + "=" * (-len(text) % 4), validate=True)


def key_id(text: str) -> int:
    """An Olm key id (base64 of a big-endian 64-bit counter) as the number the wire carries."""
    return int.from_bytes(_unpadded(text), "big")


def fallback_keys(account: vodozemac.Account) -> dict[str, vodozemac.Curve25519PublicKey]:
    """The fallback key not yet marked published, by id (at most one)."""
    # vodozemac 0.10.0's type stubs leave out the fallback-key half of Account.
    return dict(account.fallback_key)  # type: ignore[attr-defined]


def new_fallback_key(account: vodozemac.Account) -> None:
    account.generate_fallback_key()  # type: ignore[attr-defined]


def card_for(account: vodozemac.Account, identity: Identity) -> RatchetCard:
    curve = account.curve25519_key.to_bytes()
    ed = _unpadded(account.ed25519_key.to_base64())
    return sign_card(identity.fingerprint, curve, ed, identity.sign)


def unpublished_keys(
    account: vodozemac.Account, identity: Identity
) -> tuple[SignedKey | None, list[SignedKey]]:
    """The fallback key (if a new one waits) and the one-time keys not yet marked published,
    each signed for the wire, oldest first."""
    fp, sign = identity.fingerprint, identity.sign
    fallback = [sign_key(KeyKind.FALLBACK, fp, key_id(i), k.to_bytes(), sign)
                for i, k in fallback_keys(account).items()]
    one_time = [sign_key(KeyKind.ONE_TIME, fp, key_id(i), k.to_bytes(), sign)
                for i, k in account.one_time_keys.items()]
    one_time.sort(key=lambda k: k.key_id)
    return (fallback[0] if fallback else None), one_time


# The card each account file holds, by file and identity, with the file's stamp when it was read:
# a process that sends many pre-key messages reads it once (`RatchetAccount.card`).
_CARDS: dict[tuple[Path, str], tuple[Signature, RatchetCard]] = {}


def _stored_card(stored: Any, identity: Identity) -> RatchetCard | None:
    """The card a saved account holds beside its pickle, if it is this identity's."""
    data = stored.get("card") if isinstance(stored, dict) else None
    if data is None:
        return None
    try:
        return verify_card(data, identity.fingerprint, identity.sign_public)
    except RatchetKeyError:
        return None  # damaged, or another identity's: made again from the account


class RatchetAccount:
    """The Olm account of the identity in `folder`, created on first use."""

    def __init__(self, folder: Path, identity: Identity) -> None:
        self.folder = folder
        self.path = folder / ACCOUNT_FILE
        self.identity = identity
        self.pickle_key = pickle_key(identity)  # the Olm sessions are sealed under it too

    @contextlib.contextmanager
    def held(self, wait: bool = True) -> Iterator[vodozemac.Account]:
        """The account, under its lock, saved only by an explicit `save`: for a change
        that must not outlive a later step failing (`keys.ratchet.sessions`). With `wait`
        False, a lock another process holds is not waited for.

        Raises:
            UserError: the stored account is damaged, or sealed under another identity's keys.
            BlockingIOError: `wait` is False and the lock is held.
        """
        with locked(self.folder / ACCOUNT_LOCK, wait=wait):
            yield self._load()

    def save(self, account: vodozemac.Account) -> None:
        """Replace the stored account atomically; only inside `held`."""
        card = card_for(account, self.identity)
        write_json(self.path, {"v": 1, "account": account.pickle(self.pickle_key), "card": card.to_json()})
        _CARDS.pop((self.path, self.identity.fingerprint), None)

    def card(self) -> RatchetCard:
        """This account's public card, as its pre-key messages carry it, without unsealing the
        account (see The card, above); the account is made first if there is none yet.

        Raises:
            UserError: as `read`, when the account must be opened.
        """
        key = (self.path, self.identity.fingerprint)
        stamp = signature(self.path)
        cached = _CARDS.get(key)
        if stamp is not None and cached is not None and cached[0] == stamp:
            return cached[1]
        card = _stored_card(read_json(self.path, None), self.identity) if stamp is not None else None
        if card is None:
            card = card_for(self.read(), self.identity)
            stamp = signature(self.path)  # `read` may have made the file
        if stamp is not None:
            _CARDS[key] = (stamp, card)
        return card

    @contextlib.contextmanager
    def changing(self) -> Iterator[vodozemac.Account]:
        """The account, under its lock; saved when the block ends without an error.

        Raises:
            UserError: as `held`.
        """
        with self.held() as account:
            yield account
            self.save(account)

    def read(self) -> vodozemac.Account:
        """A snapshot of the account (created and saved first if there is none yet).

        Raises:
            UserError: as `changing`.
        """
        with locked(self.folder / ACCOUNT_LOCK):
            if self.path.exists():
                return self._load()
        with self.changing() as account:
            return account

    def _load(self) -> vodozemac.Account:
        stored = read_json(self.path, None)
        if stored is None:
            return vodozemac.Account()
        try:
            if not isinstance(stored, dict) or stored.get("v") != 1:
                raise ValueError("not a ratchet account of version 1")
            return vodozemac.Account.from_pickle(str(stored["account"]), self.pickle_key)
        except (KeyError, ValueError) as exc:  # vodozemac's errors are ValueErrors
            raise UserError(
                f"{ACCOUNT_FILE} in {self.folder} cannot be opened with this identity's keys ({exc}); "
                "restore it from a backup, or move it aside and a new one is made (peers then start "
                "new sessions)"
            ) from exc
