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

The short form. Only a peer whose receipts answer (so one of this version, which reads it) is
sent the short form of a message (`plaintext_of(inner, short=True)`): the Olm plaintext leaves
out what the envelope around it repeats (the version, id, sender, recipient, time, kind and
number) and carries instead "bind", a BLAKE2b-128 of those fields as the envelope names them, so
the Olm message still vouches for them (a holder of the sender's long-term box key, who can seal
envelopes, cannot move a message under another id or number). A short message then fits the
smallest size bucket, as today's envelope does, instead of the next one up: the relay cannot tell
the two apart by size, and the sender's outbox, the relay's store and the receiver's fetch carry
a quarter of the bytes.
"""

from __future__ import annotations

import json
from typing import Any, NamedTuple

import vodozemac

from durable.bounded_json import parse_json
from durable.digests import blake2b, compare_digest
from durable.errors import TamperedMessage
from keys import gate
from keys.encoding import b64d, b64e, canonical_json
from keys.envelope import MAX_PADDED, VERSION, Inner

__all__ = ["ANSWER_FIELD", "BIND_CONTEXT", "BIND_FIELD", "ENVELOPE_FIELDS", "OLM_FIELD", "OlmPart",
           "answer_field", "answer_of", "is_ratchet", "olm_part", "plaintext_of", "unwrap", "wrap"]

OLM_FIELD = "olm"
ANSWER_FIELD = "answer"
BIND_FIELD = "bind"
# What the envelope around an Olm message repeats: left out of the short form's plaintext.
ENVELOPE_FIELDS = ("v", "id", "from", "to", "ts", "kind", "seq")
BIND_CONTEXT = b"talk-ratchet-short-form-v1"


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


def plaintext_of(inner: Inner, short: bool = False) -> bytes:
    """What the Olm message encrypts: the inner envelope as today's mail carries it; `short`, the
    short form (see the module's docstring), for a peer known to read it."""
    if not short:
        data = inner.to_json()
    else:  # what `to_json` holds but the envelope fields, in its order, then the bind
        data = {**{k: v for k, v in inner.extra.items() if k not in ENVELOPE_FIELDS}, "text": inner.text,
                BIND_FIELD: b64e(_bind(inner))}
    return json.dumps(data, ensure_ascii=False, separators=(",", ":")).encode()


def _fields(outer: Inner) -> dict[str, Any]:
    """The fields a short form leaves out, as the envelope names them (`Inner.to_json`)."""
    seq = {"seq": outer.seq} if outer.seq is not None else {}
    return {**seq, "v": VERSION, "id": outer.id, "from": outer.sender, "to": outer.recipient, "ts": outer.ts,
            "kind": outer.kind}


def _bind(outer: Inner) -> bytes:
    """What a short form's "bind" is: the envelope fields it leaves out (`_fields`), hashed as
    `canonical_json` encodes them. Encoded here directly when no field needs escaping (ids, a
    time, a kind and a number, as every envelope the gate admits holds them): the same bytes,
    without sorting and encoding a dictionary on every message sent and opened."""
    texts = (outer.sender, outer.id, outer.kind, outer.recipient, outer.ts)
    joined = "".join(texts) if all(type(t) is str for t in texts) else '"'  # not text: the slow way
    # Nothing JSON escapes (a quote, a backslash, a control character: none is printable), and
    # `canonical_json` keeps any other character as it is. A text this refuses takes the slow way.
    if ((outer.seq is None or type(outer.seq) is int) and '"' not in joined and "\\" not in joined
            and joined.isprintable()):
        seq = "" if outer.seq is None else f'"seq":{outer.seq},'
        text = (f'{{"from":"{outer.sender}","id":"{outer.id}","kind":"{outer.kind}",{seq}'
                f'"to":"{outer.recipient}","ts":"{outer.ts}","v":{VERSION}}}').encode()
    else:
        text = canonical_json(_fields(outer))
    return blake2b(BIND_CONTEXT + text, digest_size=16).digest()


def _carried(outer: Inner, data: dict[str, Any]) -> Inner:
    """The inner envelope a short form stands for, once its "bind" names the fields of the
    envelope around it, which gives them (checked by the gate already): the gate checks the rest.

    Raises:
        TamperedMessage: a short form bound to other fields than the envelope's.
        gate.Invalid: what it carries fails the gate.
    """
    bind = data.pop(BIND_FIELD)
    try:
        bound = compare_digest(b64d(bind, 16), _bind(outer))
    except ValueError:
        bound = False
    if not bound:
        raise TamperedMessage("a ratchet message is bound to another id, sender, recipient, time, kind or "
                              "number than its envelope and was refused")
    data.pop("seq", None)  # the envelope's is the number; one repeated here is ignored, as the rest
    text, extra = gate.check_carried(data, outer.kind)
    return Inner(outer.id, outer.sender, outer.recipient, outer.ts, outer.kind, text, extra, outer.seq)


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
    if isinstance(data, dict) and "v" not in data and BIND_FIELD in data:
        inner = _carried(outer, data)  # its fields are the envelope's, once its bind names them
    else:
        inner = Inner.from_json(data, now)
        if (inner.id, inner.sender, inner.recipient, inner.kind, inner.seq) != (
                outer.id, outer.sender, outer.recipient, outer.kind, outer.seq):
            raise TamperedMessage("a ratchet message names another id, sender, recipient, kind or number "
                                  "than its envelope and was refused")
    if is_ratchet(inner):
        raise TamperedMessage("a ratchet message carries another ratchet message and was refused")
    return inner
