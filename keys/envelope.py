"""The sealed envelope: what a relay stores and what only the recipient can open.

    blob = SealedBox(recipient).encrypt( sender_box_key ‖ Box(sender, recipient).encrypt(pad(inner)) )

The inner Box proves who sent it; the outer SealedBox hides that sender from the relay. The
inner JSON is padded to a size bucket first, so a blob's length tells the relay only the bucket.

To a contact whose ML-KEM-768 key is pinned, the outer layer is the hybrid one instead
(`keys.hybrid`: X25519 and ML-KEM together), around the same sender key and inner Box. The
receiver tells the two apart by length alone: a classic blob is a bucket plus OVERHEAD, a
hybrid one a bucket plus OVERHEAD plus HYBRID_EXTRA, and no bucket pair makes the two equal.
Routing uses an opaque channel tag per (pair, direction), derived from the pair's shared key,
so the relay cannot link alice→bob mail to bob→alice mail or to either sender.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any, NamedTuple, TypeVar

from nacl.exceptions import CryptoError

from durable.bounded_json import parse_json
from durable.digests import blake2b
from durable.errors import MalformedMessage, MessageTooLarge, TamperedMessage, UnknownSender
from keys import gate
from keys.encoding import token_hex, utc_now_iso
from keys.hybrid import OUTER, open_outer, seal_outer
from keys.sodium import Box, PrivateKey, PublicKey, SealedBox

__all__ = [
    "CLASSIC_LENGTHS",
    "HYBRID_EXTRA",
    "HYBRID_LENGTHS",
    "MAX_BLOB",
    "MAX_PADDED",
    "Inner",
    "channel_tag",
    "new_message",
    "open_blob",
    "pair_tags",
    "receipt_tag",
    "seal",
]

VERSION = 1
BUCKETS = (512, 2048, 8192, 32768, 65536)
MAX_PADDED = BUCKETS[-1]
# sender key 32 + Box nonce 24 + Box MAC 16 + SealedBox ephemeral key 32 + MAC 16
OVERHEAD = 32 + 24 + 16 + 32 + 16
HYBRID_EXTRA = OUTER - (32 + 16)  # the hybrid outer layer in place of the SealedBox
CLASSIC_LENGTHS = frozenset(b + OVERHEAD for b in BUCKETS)
HYBRID_LENGTHS = frozenset(b + OVERHEAD + HYBRID_EXTRA for b in BUCKETS)
# The largest hybrid blob: a relay older than hybrid sealing refuses it (413), so a message in
# the largest bucket to a post-quantum contact needs the relay upgraded too.
MAX_BLOB = MAX_PADDED + OVERHEAD + HYBRID_EXTRA


C = TypeVar("C")


class Inner(NamedTuple):
    """The message as the sender wrote it. (A NamedTuple, not a dataclass: every `talk send` and
    `talk receive` loads this module, and `dataclasses` costs several milliseconds to import.)"""

    id: str
    sender: str
    recipient: str
    ts: str
    kind: str
    text: str
    extra: dict[str, Any]
    seq: int | None = None  # the sender's count of its chat messages to this recipient (from 1)

    def to_json(self) -> dict[str, Any]:
        return {
            **self.extra,
            **({"seq": self.seq} if self.seq is not None else {}),
            "v": VERSION,
            "id": self.id,
            "from": self.sender,
            "to": self.recipient,
            "ts": self.ts,
            "kind": self.kind,
            "text": self.text,
        }

    @classmethod
    def from_json(cls, data: Any, now: float | None = None) -> Inner:
        """The envelope as `keys.gate` admits it; raises gate.Invalid naming the bad field."""
        f = gate.check_inner(data, time.time() if now is None else now)
        extra = f["extra"]
        seq = extra.pop("seq", None)  # a field of its own: the receiver's order check reads it
        return cls(f["id"], f["from"], f["to"], f["ts"], f["kind"], f["text"], extra, seq)


def new_message(sender: str, recipient: str, text: str, kind: str = "chat", seq: int | None = None,
                msg_id: str | None = None, **extra: Any) -> Inner:
    """A message with a new random id, or `msg_id` (one fixed before sending, as a file
    transfer's: however often it is resumed, the message is the same one)."""
    return Inner(msg_id or token_hex(16), sender, recipient, utc_now_iso(), kind, text, extra, seq)


def pad(data: bytes) -> bytes:
    """ISO/IEC 7816-4 padding (0x80 then zeros) up to the smallest bucket that fits."""
    size = len(data) + 1
    bucket = next((b for b in BUCKETS if b >= size), None)
    if bucket is None:
        raise MessageTooLarge(
            f"message is {len(data):,} bytes once encoded; the limit is {MAX_PADDED - 1:,}: "
            "shorten it, or send a path to a file instead"
        )
    return data + b"\x80" + b"\0" * (bucket - size)


def unpad(data: bytes) -> bytes:
    end = data.rstrip(b"\0")
    if not end.endswith(b"\x80"):
        raise ValueError("bad padding")
    return end[:-1]


def seal(inner: Inner, sender: PrivateKey, recipient: PublicKey, recipient_kem: bytes | None = None) -> bytes:
    """`inner` sealed to `recipient`; hybrid when its pinned KEM key `recipient_kem` is given."""
    plain = pad(json.dumps(inner.to_json(), ensure_ascii=False, separators=(",", ":")).encode())
    payload = bytes(sender.public_key) + bytes(Box(sender, recipient).encrypt(plain))
    if recipient_kem is not None:
        return seal_outer(payload, bytes(recipient), recipient_kem)
    return bytes(SealedBox(recipient).encrypt(payload))


def _outer(blob: bytes, own: PrivateKey, own_kem: bytes | None) -> bytes:
    """The sender key and inner Box of `blob`, out of whichever outer layer its length says."""
    if len(blob) in HYBRID_LENGTHS and own_kem is not None:
        return open_outer(blob, own, own_kem)
    try:
        return bytes(SealedBox(own).decrypt(blob))
    except CryptoError as exc:
        raise TamperedMessage("a message did not decrypt: it was tampered with or not for you") from exc


def open_blob(
    blob: bytes, own: PrivateKey, own_fp: str, candidates: Callable[[bytes], list[C]],
    fingerprint_of: Callable[[C], str], own_kem: bytes | None = None,
) -> tuple[C, Inner]:
    """Open a blob addressed to `own` (and to `own_kem`, the KEM seed, if hybrid). `candidates`
    maps a sender box key to the pinned contacts that hold it (normally one).

    The outer key only narrows the search: the sender is the candidate whose fingerprint the
    inner `from` names, and the inner Box proves that the writer holds that box key. So a
    second contact pinned with someone else's box key never receives the owner's mail.

    Raises TamperedMessage for anything that does not open or parse (MalformedMessage when it
    opened but the gate refused a field), UnknownSender for a valid seal by a key no contact
    pins; the caller must never show such a message.
    """
    outer = _outer(blob, own, own_kem)
    sender_key, boxed = outer[:32], outer[32:]
    pinned = candidates(sender_key)
    if not pinned:
        raise UnknownSender("a message from an unknown sender was dropped unread")
    try:
        plain = unpad(Box(own, PublicKey(sender_key)).decrypt(boxed))
    except (CryptoError, ValueError) as exc:
        raise TamperedMessage("a message failed its integrity check and was dropped") from exc
    try:
        data = parse_json(plain, MAX_PADDED)
    except ValueError as exc:
        # The Box opened: one of `pinned` wrote it. Named when only one could have.
        writer = pinned[0] if len(pinned) == 1 else None
        raise MalformedMessage(f"a message was refused: its content is {exc}", writer) from exc
    try:
        inner = Inner.from_json(data)
    except gate.Invalid as exc:
        # Only a sender the envelope itself names, among those holding this key, is told.
        named = data.get("from") if isinstance(data, dict) else None
        sender = next((c for c in pinned if fingerprint_of(c) == named), None)
        raise MalformedMessage(f"a message was refused: {exc}", sender, gate.salvage_id(data)) from exc
    contact = next((c for c in pinned if fingerprint_of(c) == inner.sender), None)
    if contact is None or inner.recipient != own_fp:
        raise TamperedMessage("a message names the wrong sender or recipient and was dropped")
    return contact, inner


def channel_tag(own: PrivateKey, peer: PublicKey, recipient_fp: str) -> str:
    """The mailbox tag for mail *to* `recipient_fp` on the channel between `own` and `peer`.

    Both ends compute the same value (the Box key is symmetric); only they can.
    """
    return pair_tags(own, peer, recipient_fp)[0]


def receipt_tag(own: PrivateKey, peer: PublicKey, recipient_fp: str) -> str:
    """The tag for receipts *to* `recipient_fp`: apart from chat, so a sender waiting for its
    receipts can fetch them alone while its chat mail stays for whoever reads it."""
    return pair_tags(own, peer, recipient_fp)[1]


def pair_tags(own: PrivateKey, peer: PublicKey, recipient_fp: str) -> tuple[str, str]:
    """(chat tag, receipt tag) for mail to `recipient_fp`, from one key agreement."""
    shared = bytes(Box(own, peer).shared_key())

    def tag(person: bytes) -> str:
        return blake2b(recipient_fp.encode(), key=shared, digest_size=16, person=person).hexdigest()

    return tag(b"talk-channel-v1"), tag(b"talk-receipt-v1")
