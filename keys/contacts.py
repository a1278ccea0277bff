"""Contacts: a local name bound to a pinned fingerprint and the keys that hash to it.

A contact is only ever created from a bundle that was checked against a fingerprint the user
already had (from `talk add`, or from an invite code), so every stored key is pinned.

A contact's ML-KEM-768 key (post-quantum sealing, `keys.hybrid`) is pinned with it when its
bundle carries one its pinned signing key signed, or later, once, by `pin_kem` (a contact
pinned before KEM keys existed); it is never replaced, and mail to a contact with one is never
sealed without it.

Each key belongs to one contact. A self-signed bundle proves only its sign key, so anyone may
publish their own sign key beside someone else's box key; such a bundle is refused once either
key is pinned, so it can neither shadow nor be shadowed by the real owner.
"""

from __future__ import annotations

import time
from enum import StrEnum
from pathlib import Path
from typing import Any, NamedTuple

from durable.errors import KeyInUse, NotFound, SecurityError, UserError
from durable.files import read_json, write_json
from durable.locks import folder_locked
from durable.parsed_file import ParsedFile
from keys.encoding import b64d, b64e
from keys.gate import usable_box_key
from keys.hybrid import KEM_PUBLIC
from keys.identity import KeyBundle
from keys.names import MAX_NAME, check_name, confusable

__all__ = ["Contact", "ContactBook", "Source", "peer_name", "pinned_contact"]

CONTACTS_FILE = "contacts.json"


class Source(StrEnum):
    ADDED = "added"  # talk add FINGERPRINT
    INVITED = "invited"  # they joined with our invite code
    JOINED = "joined"  # we joined with their invite code


class Contact(NamedTuple):
    name: str
    fingerprint: str
    sign_key: bytes
    box_key: bytes
    source: Source
    pinned_at: float
    verified_at: float | None = None
    kem_key: bytes | None = None  # ML-KEM-768, signed by sign_key: mail is then sealed hybrid
    kem_pinned_at: float | None = None
    kem_checked_at: float | None = None  # when the relay was last asked for a missing kem_key

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "fingerprint": self.fingerprint,
            "sign_key": b64e(self.sign_key),
            "box_key": b64e(self.box_key),
            "source": self.source.value,
            "pinned_at": self.pinned_at,
            "verified_at": self.verified_at,
            **({} if self.kem_key is None
               else {"kem_key": b64e(self.kem_key), "kem_pinned_at": self.kem_pinned_at}),
            **({} if self.kem_checked_at is None else {"kem_checked_at": self.kem_checked_at}),
        }

    @property
    def post_quantum(self) -> bool:
        return self.kem_key is not None

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Contact:
        return cls(
            name=data["name"],
            fingerprint=data["fingerprint"],
            sign_key=b64d(data["sign_key"], 32),
            box_key=b64d(data["box_key"], 32),
            source=Source(data["source"]),
            pinned_at=float(data["pinned_at"]),
            verified_at=data.get("verified_at"),
            kem_key=None if data.get("kem_key") is None else b64d(data["kem_key"], KEM_PUBLIC),
            kem_pinned_at=data.get("kem_pinned_at"),
            kem_checked_at=data.get("kem_checked_at"),
        )


def pinned_contact(name: str, bundle: KeyBundle, source: Source) -> Contact:
    """A contact for `bundle`, with its KEM key if the bundle's signing key signed one for it
    (one that is not is left out: the contact is then "post-quantum: no", as with none).
    Raises UserError for a bad name, SecurityError for a box key nothing can be sealed to (it
    would fail every later send)."""
    if not usable_box_key(bundle.box_key):
        raise SecurityError(f"the keys for {bundle.fingerprint} hold an unusable box key; nothing was "
                            "pinned: ask its owner to check `talk id`")
    now = time.time()
    kem = bundle.kem_key()
    return Contact(
        name=check_name(name),
        fingerprint=bundle.fingerprint,
        sign_key=bundle.sign_key,
        box_key=bundle.box_key,
        source=source,
        pinned_at=now,
        kem_key=kem,
        kem_pinned_at=None if kem is None else now,
    )


def free_name(wanted: str, taken: set[str]) -> str:
    """`bob`, else `bob-2`, `bob-3`…: a peer's chosen name never overwrites another contact."""
    if wanted not in taken:
        return wanted
    n = 2
    while f"{wanted}-{n}" in taken:
        n += 1
    return f"{wanted}-{n}"


def peer_name(wanted: str, fingerprint: str, taken: set[str]) -> str:
    """The local name for a contact who calls itself `wanted` (a joiner's or inviter's own
    choice, so hostile), always one that obeys the name rule and is not in `taken`: `wanted`
    if it is a valid name that looks like no other contact's; with a fingerprint prefix (the
    name cut to make room) if another contact has that very name; `peer-<fingerprint>` if it
    breaks the name rule, only looks like another contact's name (bob spelt with a Cyrillic o),
    or cannot take the prefix (a name in another script than the prefix's hex letters)."""
    fallback = free_name(f"peer-{fingerprint[:8]}", taken)
    if not valid_name(wanted):
        return fallback
    twin = confusable(wanted, taken)
    if twin is None:
        return wanted
    suffix = f"-{fingerprint[:6]}"
    prefixed = wanted[:MAX_NAME - len(suffix)] + suffix
    if twin != wanted or not valid_name(prefixed) or confusable(prefixed, taken) is not None:
        return fallback
    return prefixed


def valid_name(name: str) -> bool:
    try:
        check_name(name)
    except UserError:
        return False
    return True


def _contacts_of(raw: dict[str, Any]) -> tuple[Contact, ...]:
    return tuple(sorted((Contact.from_json(v) for v in raw.values()), key=lambda c: c.name))


class ContactBook:
    """The contacts of one identity, in `contacts.json` of its folder."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.path = folder / CONTACTS_FILE
        # Read on every message a follower takes: parsed again only when the file changed.
        self._book = ParsedFile(self.path, {}, _contacts_of)

    def all(self) -> list[Contact]:
        return list(self._book.get())

    def get(self, name: str) -> Contact:
        for contact in self.all():
            if contact.name == name or contact.fingerprint == name:
                return contact
        raise NotFound(f"no contact {name!r}; see `talk contacts`, or add one with `talk add`")

    def with_box_key(self, box_key: bytes) -> list[Contact]:
        """Every contact pinned to this box key: one, unless the book predates `pin`'s check.
        Which of them sent a message is for the message's authenticated sender to say."""
        return [c for c in self.all() if c.box_key == box_key]

    def by_fingerprint(self, fp: str) -> Contact | None:
        return next((c for c in self.all() if c.fingerprint == fp), None)

    def check_free(self, bundle: KeyBundle, refusing: str = "the keys of") -> None:
        """Raise KeyInUse if the bundle shares a key with a contact it is not; its message
        starts "refused {refusing} {fingerprint}"."""
        clash = key_clash(self.all(), bundle, refusing)
        if clash is not None:
            raise clash

    def pin(self, contact: Contact) -> Contact:
        """Store a new contact. Re-pinning the same keys is a no-op that returns the stored one.

        Raises:
            KeyInUse: its sign or box key is already pinned to another contact.
            UserError: its name is taken by another contact.
        """
        with folder_locked(self.folder):
            raw: dict[str, Any] = read_json(self.path, {})
            for existing in raw.values():
                if existing["fingerprint"] == contact.fingerprint:
                    return Contact.from_json(existing)
            clash = key_clash([Contact.from_json(v) for v in raw.values()], contact)
            if clash is not None:
                raise clash
            if contact.name in raw:
                raise UserError(
                    f"the name {contact.name!r} is already used for another contact; "
                    "pick another with --name"
                )
            raw[contact.name] = contact.to_json()
            write_json(self.path, raw)
        return contact

    def pin_kem(self, fp: str, bundle: KeyBundle | None, now: float) -> Contact:
        """Pin the KEM key in `bundle` (the relay's, for contact `fp`) if the contact has none
        and the signing key pinned for it signed this one; either way record that the relay was
        asked (`now`). Returns the contact as stored; its `kem_pinned_at` is `now` if pinned.

        Raises:
            NotFound: no contact `fp`.
        """
        with folder_locked(self.folder):
            raw: dict[str, Any] = read_json(self.path, {})
            name = next((n for n, v in raw.items() if v["fingerprint"] == fp), None)
            if name is None:
                raise NotFound(f"no contact {fp}; see `talk contacts`")
            contact = Contact.from_json(raw[name])
            if contact.kem_key is not None:
                return contact
            kem = None if bundle is None or bundle.kem is None else bundle.kem
            if kem is not None and kem.signed_by(fp, contact.sign_key):
                contact = contact._replace(kem_key=kem.key, kem_pinned_at=now)
            raw[name] = contact._replace(kem_checked_at=now).to_json()
            write_json(self.path, raw)
        return Contact.from_json(raw[name])

    def mark_verified(self, name: str) -> Contact:
        """Record that the keys were checked now; returns the contact as stored."""
        with folder_locked(self.folder):
            raw = read_json(self.path, {})
            raw[name]["verified_at"] = time.time()
            write_json(self.path, raw)
        return Contact.from_json(raw[name])


def key_clash(pinned: list[Contact], keys: KeyBundle | Contact,
              refusing: str = "the keys of") -> KeyInUse | None:
    """The refusal for keys that reuse a key of another pinned contact, or None."""
    for other in pinned:
        if other.fingerprint == keys.fingerprint:
            continue
        which = ("sign" if other.sign_key == keys.sign_key
                 else "box" if other.box_key == keys.box_key else None)
        if which is not None:
            return KeyInUse(
                f"refused {refusing} {keys.fingerprint}: its {which} key is already pinned to your "
                f"contact {other.name!r} ({other.fingerprint}), so one of the two does not own it; "
                "nothing was pinned: check both fingerprints with their owners over another channel"
            )
    return None
