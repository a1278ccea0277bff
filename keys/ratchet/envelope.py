"""An Olm message inside the sealed envelope: what forward-secret mail looks like once opened.

The sealed envelope (`keys.envelope`) stays exactly as it is, outer SealedBox, padding to a
size bucket and channel tag included, so a relay learns nothing new. Only the inner JSON
changes: instead of the text it carries

    {"v": 1, "id", "from", "to", "ts", "kind", "seq"?, "text": "",
     "olm": {"type": 0 | 1, "body": B64, "card": CARD?}}

where `body` is the Olm message whose plaintext is the whole inner envelope of today (text,
number, hops, task and all), and `card` (pre-key messages only) is the sender's ratchet card
(`keys.ratchet.card`), which the receiver checks against the pinned signing key before it
starts a session with the card's identity key. The outer fields repeat the inner ones that a
receiver needs before it touches the ratchet (the id, to recognise a duplicate; the kind, to
answer it; the number, so a duplicate still repairs the sender's count, `follower.receive.channeldb`);
the two must agree, or the message is refused.

A receipt may carry an answer: {"answer": {"type": 1, "body": B64}}, a normal Olm message with
an empty plaintext, in the session the receipted pre-key messages started. Until a sender opens a
message of its peer in a session, Olm makes every message it sends there a pre-key message (the
one-time key's id, its base key and the card, so any one of them can start the peer's side); a
stream its peer only receipts would stay so for good. The answer is such a message: once it
opens, the session is confirmed and later messages are normal ones. It rides the receipt, so a
relay sees nothing new (one more field in a sealed envelope), and a peer of a version without it
drops the field unread (`keys.gate`).
"""

from __future__ import annotations

import json
from typing import Any, NamedTuple

import vodozemac

from durable.bounded_json import parse_json
from durable.errors import TamperedMessage
from keys import gate
from keys.encoding import b64d, b64e
from keys.envelope import MAX_PADDED, Inner

__all__ = ["ANSWER_FIELD", "OLM_FIELD", "OlmPart", "answer_field", "answer_of", "is_ratchet", "olm_part",
           "plaintext_of", "unwrap", "wrap"]

OLM_FIELD = "olm"
ANSWER_FIELD = "answer"


class OlmPart(NamedTuple):
    message: vodozemac.AnyOlmMessage
    card: dict[str, Any] | None


def is_ratchet(inner: Inner) -> bool:
    return OLM_FIELD in inner.extra


def wrap(inner: Inner, message: vodozemac.AnyOlmMessage, card: dict[str, Any] | None) -> Inner:
    """The envelope that carries `inner` as the Olm `message` (with the sender's card, if given)."""
    kind, body = message.to_parts()
    olm: dict[str, Any] = {"type": kind, "body": b64e(body)}
    if card is not None:
        olm["card"] = card
    return Inner(inner.id, inner.sender, inner.recipient, inner.ts, inner.kind, "", {OLM_FIELD: olm},
                 inner.seq)


def answer_field(message: vodozemac.AnyOlmMessage) -> dict[str, Any] | None:
    """A receipt's answer field carrying `message`; None for a pre-key message, which confirms
    nothing (this side's own unconfirmed session was the one used last)."""
    kind, body = message.to_parts()
    return {"type": kind, "body": b64e(body)} if kind == 1 else None


def answer_of(inner: Inner) -> vodozemac.AnyOlmMessage | None:
    """The answer a receipt carries (the gate checked its shape); None if none, or it does not
    decode (it is only ever a hint: the receipt stands without it)."""
    answer = inner.extra.get(ANSWER_FIELD)
    if not isinstance(answer, dict):
        return None
    try:
        return vodozemac.AnyOlmMessage.from_parts(int(answer["type"]), b64d(answer["body"]))
    except (KeyError, TypeError, ValueError):
        return None


def plaintext_of(inner: Inner) -> bytes:
    """What the Olm message encrypts: the inner envelope as today's mail carries it."""
    return json.dumps(inner.to_json(), ensure_ascii=False, separators=(",", ":")).encode()


def olm_part(inner: Inner) -> OlmPart:
    """The Olm message (and card) an envelope carries; the gate checked the field's shape.

    Raises:
        TamperedMessage: the Olm message does not decode.
    """
    olm = inner.extra[OLM_FIELD]
    try:
        message = vodozemac.AnyOlmMessage.from_parts(int(olm["type"]), b64d(olm["body"]))
    except ValueError as exc:
        raise TamperedMessage(f"a ratchet message does not decode ({exc})") from exc
    return OlmPart(message, olm.get("card"))


def unwrap(outer: Inner, plaintext: bytes, now: float | None = None) -> Inner:
    """The inner envelope an Olm message carried, once it agrees with the envelope around it.

    Raises:
        gate.Invalid: the inner envelope fails the gate.
        TamperedMessage: it names another id, sender, recipient or kind than the envelope.
    """
    try:
        data = parse_json(plaintext, MAX_PADDED)
    except ValueError as exc:
        raise gate.Invalid(f"the ratchet message's content is {exc}") from exc
    inner = Inner.from_json(data, now)
    if (inner.id, inner.sender, inner.recipient, inner.kind, inner.seq) != (
            outer.id, outer.sender, outer.recipient, outer.kind, outer.seq) or is_ratchet(inner):
        raise TamperedMessage("a ratchet message names another id, sender, recipient, kind or number "
                              "than its envelope and was refused")
    return inner
