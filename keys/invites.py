"""Invite codes: first contact without reading fingerprints aloud.

A code carries the inviter's fingerprint, a random secret and an expiry. From the secret both
sides derive a mailbox tag and a key: the joiner seals a contact request (its own key bundle)
under that key and deposits it under that tag; the inviter fetches it like any other channel.
The relay sees neither the secret nor the bundle, so it can read or forge nothing; the
fingerprint in the code lets the joiner check the inviter's keys. The relay's invite slot and
the inviter's own record both make a code single-use and mortal.

A bundle's self-signature proves its sign key only; an X25519 box key cannot sign. So the
request also carries a possession proof: a MAC under the X25519 key the joiner's box secret
agrees with the inviter's box key, over the invite secret and both of the joiner's keys. Only
the holder of that box secret (or the inviter) can make it, it is bound to this invite, and
the inviter refuses a request without it: nobody joins with another contact's box key.
"""

from __future__ import annotations

import base64
import binascii
import json
import os
import struct
import time
from enum import StrEnum
from pathlib import Path
from typing import Any, NamedTuple

from nacl.exceptions import CryptoError

from durable.bounded_json import parse_json
from durable.digests import blake2b, compare_digest
from durable.errors import InviteError, TamperedMessage
from durable.files import read_json, write_json
from durable.locks import folder_locked
from durable.parsed_file import ParsedFile
from keys.encoding import b64d, b64e
from keys.envelope import MAX_PADDED, pad, unpad
from keys.gate import is_hex32
from keys.identity import KeyBundle
from keys.sodium import Box, PrivateKey, PublicKey, SecretBox

__all__ = ["InviteBook", "InviteCode", "InviteState", "box_proof", "new_code", "open_request", "parse_code",
           "seal_request", "state_of"]

PREFIX = "talk-"
INVITES_FILE = "invites.json"
KEEP_DAYS = 30  # an invite that ended (used, revoked, expired) is remembered this long
PROOF_PERSON = b"talk-box-proof"


class InviteCode(NamedTuple):
    fingerprint: str
    secret: bytes
    expires: int  # unix seconds

    def encode(self) -> str:
        raw = bytes.fromhex(self.fingerprint) + self.secret + struct.pack(">I", self.expires)
        return PREFIX + base64.b32encode(raw).decode().rstrip("=").lower()

    @property
    def tag(self) -> str:
        return blake2b(self.secret, digest_size=16, person=b"talk-invite-tag").hexdigest()

    @property
    def key(self) -> bytes:
        return blake2b(self.secret, digest_size=32, person=b"talk-invite-key").digest()

    def expired(self, now: float) -> bool:
        return now >= self.expires


def new_code(fingerprint: str, days: float, now: float) -> InviteCode:
    if not 0 < days <= 365:
        raise InviteError("--expires must be between 0 and 365 days")
    return InviteCode(fingerprint, os.urandom(16), int(now + days * 86400))


def parse_code(text: str) -> InviteCode:
    text = text.strip()
    body = text[len(PREFIX):] if text.startswith(PREFIX) else ""
    try:
        raw = base64.b32decode(body.upper() + "=" * (-len(body) % 8))
    except (binascii.Error, ValueError):
        raw = b""
    if len(raw) != 36:
        raise InviteError(
            f"{text[:20]!r}… is not a talk invite code; ask the inviter to send the whole "
            "`talk-…` code again"
        )
    (expires,) = struct.unpack(">I", raw[32:])
    return InviteCode(raw[:16].hex(), raw[16:32], expires)


def box_proof(code: InviteCode, joiner: KeyBundle, own: PrivateKey, peer: PublicKey) -> bytes:
    """The proof that the joiner holds the secret of `joiner.box_key`, for this invite.

    The joiner computes it with its box secret and the inviter's box key; the inviter
    recomputes it with its own box secret and the joiner's box key (the agreement is symmetric).
    """
    shared = bytes(Box(own, peer).shared_key())
    bound = code.secret + joiner.sign_key + joiner.box_key
    return blake2b(bound, key=shared, digest_size=32, person=PROOF_PERSON).digest()


def seal_request(code: InviteCode, joiner: KeyBundle, proof: bytes, request_id: str) -> bytes:
    body = {"v": 1, "kind": "contact_request", "id": request_id, "bundle": joiner.to_json(),
            "box_proof": b64e(proof)}
    return bytes(SecretBox(code.key).encrypt(pad(json.dumps(body).encode())))


def open_request(code: InviteCode, blob: bytes, own: PrivateKey) -> tuple[str, KeyBundle]:
    """Return (request id, the joiner's checked bundle); `own` is the inviter's box secret.

    Raises:
        TamperedMessage: the request does not open with the code, its bundle is not
            self-signed, or it does not prove that the joiner holds its box key.
    """
    try:
        body = parse_json(unpad(SecretBox(code.key).decrypt(blob)), MAX_PADDED)
        bundle = KeyBundle.from_json(body["bundle"])
        request_id = body["id"]
        raw_proof = body.get("box_proof")
        proof = None if raw_proof is None else b64d(raw_proof, 32)
    except (CryptoError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise TamperedMessage("a contact request did not open with its invite code; dropped") from exc
    if not bundle.self_signed():
        raise TamperedMessage("a contact request carried keys with a bad self-signature; dropped")
    if not is_hex32(request_id):
        raise TamperedMessage("a contact request carried an id that is not 32 lowercase hex; dropped")
    if proof is None:
        raise TamperedMessage(
            f"refused a contact request from {bundle.fingerprint}: it carries no proof that it "
            "holds its box key (an older talk?); the joiner should update talk and ask for a new code")
    try:
        expected = box_proof(code, bundle, own, PublicKey(bundle.box_key))
    except CryptoError:  # a degenerate box key agrees on nothing
        expected = b""
    if not compare_digest(proof, expected):
        raise TamperedMessage(
            f"refused a contact request from {bundle.fingerprint}: it names a box key its sender "
            "does not hold (someone else's?); invite the person you meant with a new code")
    return request_id, bundle


class InviteState(StrEnum):
    OPEN = "open"
    USED = "used"
    REVOKED = "revoked"
    EXPIRED = "expired"


def state_of(record: dict[str, Any], now: float) -> InviteState:
    stored = InviteState(record["state"])
    if stored is InviteState.OPEN and now >= record["expires"]:
        return InviteState.EXPIRED
    return stored


def _codes_of(raw: dict[str, dict[str, Any]]) -> tuple[tuple[dict[str, Any], InviteCode | None], ...]:
    """Each stored invite with its code parsed (None: damaged, which only matters while the
    invite is open: `live` then parses it again, to raise); the records are only read."""
    return tuple((record, _parsed_or_none(record)) for record in raw.values())


def _parsed_or_none(record: dict[str, Any]) -> InviteCode | None:
    try:
        return parse_code(record["code"])
    except Exception:  # whatever it is, `live` meets it again if the invite is open
        return None


class InviteBook:
    """The invites an identity has issued, keyed by tag, in `invites.json`."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.path = folder / INVITES_FILE
        # Read on every drain a follower makes: parsed again only when the file changed.
        self._codes = ParsedFile(self.path, {}, _codes_of)

    def all(self) -> dict[str, dict[str, Any]]:
        data: dict[str, dict[str, Any]] = read_json(self.path, {})
        return data

    def add(self, code: InviteCode) -> None:
        """Record a new invite; invites that ended more than KEEP_DAYS ago are forgotten on the
        way, so the file holds recent invites only, however many were ever made."""
        with folder_locked(self.folder):
            now = time.time()
            data = {t: r for t, r in self.all().items() if r["expires"] + KEEP_DAYS * 86400 > now}
            data[code.tag] = {
                "code": code.encode(),
                "created": int(time.time()),
                "expires": code.expires,
                "state": InviteState.OPEN.value,
            }
            write_json(self.path, data)

    def live(self, now: float) -> list[InviteCode]:
        return [parse_code(record["code"]) if code is None else code
                for record, code in self._codes.get() if state_of(record, now) is InviteState.OPEN]

    def find(self, code_text: str) -> dict[str, Any]:
        code = parse_code(code_text)
        record = self.all().get(code.tag)
        if record is None:
            raise InviteError("no such invite of yours; see `talk invite list`")
        return record

    def set_state(self, tag: str, state: InviteState, **fields: Any) -> None:
        with folder_locked(self.folder):
            data = self.all()
            data[tag].update(state=state.value, **fields)
            write_json(self.path, data)

