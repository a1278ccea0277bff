"""keys.ratchet.envelope: an Olm message inside the sealed envelope, and what it must agree with."""

from __future__ import annotations

import base64
import hashlib
import json
import time

import pytest
import vodozemac

from durable.errors import TamperedMessage
from keys import gate
from keys.encoding import canonical_json
from keys.envelope import Inner, new_message, open_blob, seal
from keys.identity import Identity
from keys.ratchet.envelope import (
    BIND_CONTEXT,
    BIND_FIELD,
    ENVELOPE_FIELDS,
    answer_field,
    answer_of,
    is_ratchet,
    olm_part,
    plaintext_of,
    unwrap,
    wrap,
)


def session_pair() -> tuple[vodozemac.Session, vodozemac.Account]:
    """An outbound session from a fresh account to `receiver`, and the receiver's account."""
    receiver = vodozemac.Account()
    receiver.generate_one_time_keys(1)
    key = next(iter(receiver.one_time_keys.values()))
    return vodozemac.Account().create_outbound_session(receiver.curve25519_key, key), receiver


def opened(inner: Inner, sender: Identity, receiver: Identity) -> Inner:
    blob = seal(inner, sender.box_secret, receiver.box_secret.public_key)
    return open_blob(blob, receiver.box_secret, receiver.fingerprint, lambda key: [sender.fingerprint],
                     lambda c: c)[1]


def test_the_envelope_carries_the_olm_message_and_the_card_but_not_the_text(
        alice_id: Identity, bob_id: Identity) -> None:
    real = new_message(alice_id.fingerprint, bob_id.fingerprint, "secret words", seq=3, hops=[])
    session, _ = session_pair()
    message = session.encrypt(plaintext_of(real))
    outer = opened(wrap(real, message, {"v": 1}), alice_id, bob_id)
    assert is_ratchet(outer) and outer.text == "" and "secret" not in json.dumps(outer.to_json())
    assert (outer.id, outer.seq, outer.kind) == (real.id, 3, "chat")
    part = olm_part(outer)
    assert part.card == {"v": 1} and part.message.to_parts() == message.to_parts()


def test_the_carried_message_must_name_what_its_envelope_names(alice_id: Identity, bob_id: Identity) -> None:
    real = new_message(alice_id.fingerprint, bob_id.fingerprint, "hi", seq=1)
    session, _ = session_pair()
    outer = wrap(real, session.encrypt(plaintext_of(real)), None)
    assert unwrap(outer, plaintext_of(real)).text == "hi"
    other_sender = Inner(real.id, bob_id.fingerprint, bob_id.fingerprint, real.ts, "chat", "hi", {}, 1)
    other_number = Inner(real.id, real.sender, real.recipient, real.ts, "chat", "hi", {}, 2)
    for forged in (other_sender, other_number, outer):  # the last: a ratchet message inside one
        with pytest.raises(TamperedMessage):
            unwrap(outer, plaintext_of(forged))
    with pytest.raises(gate.Invalid):
        unwrap(outer, b"not json")


def test_what_a_short_form_carries_is_gated_like_a_whole_message(alice_id: Identity,
                                                                 bob_id: Identity) -> None:
    real = new_message(alice_id.fingerprint, bob_id.fingerprint, "hi", seq=4, hops=[])
    outer = wrap(real, session_pair()[0].encrypt(b"x"), None)
    bind = json.loads(plaintext_of(real, short=True))[BIND_FIELD]

    def short(**fields: object) -> bytes:
        return json.dumps({**fields, BIND_FIELD: bind}).encode()

    assert unwrap(outer, short(text="hi", hops=[])) == Inner.from_json(real.to_json())
    # Fields the envelope gives are its own, whatever the short form says; the number too.
    said_else = unwrap(outer, short(text="hi", id="0" * 32, ts="then", kind="receipt", seq=9))
    assert (said_else.id, said_else.ts, said_else.kind, said_else.seq) == (real.id, real.ts, "chat", 4)
    for bad in (short(text=7), short(text="x" * (gate.MAX_TEXT + 1)), short(text="hi", hops="nope"),
                short(text="hi", task="not a task"), short(text="hi", group={"op": "leave"}), b"[1]"):
        with pytest.raises(gate.Invalid):
            unwrap(outer, bad)
    with pytest.raises(TamperedMessage):  # a ratchet message inside one
        unwrap(outer, short(text="", olm={"type": 1, "body": "QUJD"}))
    receipt = new_message(alice_id.fingerprint, bob_id.fingerprint, "", "receipt")
    receipt_outer = wrap(receipt, session_pair()[0].encrypt(b"x"), None)
    no_items = json.dumps({"text": "", BIND_FIELD: json.loads(plaintext_of(receipt, short=True))[BIND_FIELD]})
    with pytest.raises(gate.Invalid, match="no items"):
        unwrap(receipt_outer, no_items.encode())


def test_the_gate_admits_only_an_olm_field_of_its_shape() -> None:
    assert gate.check_olm({"type": 0, "body": "QUJD", "card": {}}) == {"type": 0, "body": "QUJD", "card": {}}
    bad: object
    for bad in ([], {"type": 2, "body": "QUJD"}, {"type": True, "body": "QUJD"}, {"type": 1, "body": ""},
                {"type": 1, "body": "QUJD", "card": "x"}):
        with pytest.raises(gate.Invalid):
            gate.check_olm(bad)


def test_an_olm_body_that_does_not_decode_is_a_tampered_message(alice_id: Identity, bob_id: Identity) -> None:
    outer = Inner.from_json({**new_message(alice_id.fingerprint, bob_id.fingerprint, "").to_json(),
                             "olm": {"type": 1, "body": "AAAA"}}, time.time())
    with pytest.raises(TamperedMessage):
        olm_part(outer)


def test_a_carried_message_nested_past_the_limit_fails_the_gate(alice_id: Identity, bob_id: Identity) -> None:
    real = new_message(alice_id.fingerprint, bob_id.fingerprint, "hi", seq=1)
    session, _ = session_pair()
    outer = wrap(real, session.encrypt(plaintext_of(real)), None)
    for poison in (b"[" * 20_000 + b"]" * 20_000, b'{"a":' * 5000 + b"1" + b"}" * 5000):
        with pytest.raises(gate.Invalid, match="deeper than"):
            unwrap(outer, poison)


def test_a_receipt_carries_only_a_normal_message_as_its_answer(alice_id: Identity, bob_id: Identity) -> None:
    sender, receiver = vodozemac.Account(), vodozemac.Account()
    receiver.generate_one_time_keys(1)
    one_time = next(iter(receiver.one_time_keys.values()))
    outbound = sender.create_outbound_session(receiver.curve25519_key, one_time)
    pre_key = outbound.encrypt(b"first")
    assert answer_field(pre_key) is None  # confirms nothing: a session of the sender's own, unanswered
    started = pre_key.to_pre_key()
    assert started is not None
    inbound, _ = receiver.create_inbound_session(sender.curve25519_key, started)
    reply = inbound.encrypt(b"")
    field = answer_field(reply)
    assert field is not None and gate.check_answer(field) == field
    item = {"ref": "a" * 32, "state": "spooled", "reason": ""}
    plain = new_message(bob_id.fingerprint, alice_id.fingerprint, "1 receipt(s)", "receipt", receipts=[item])
    receipt = Inner.from_json({**plain.to_json(), "answer": field}, time.time())
    answer = answer_of(receipt)
    assert answer is not None and outbound.decrypt(answer) == b""
    for bad in ({"type": 0, "body": "QUJD"}, {"type": 1, "body": "QUJD", "card": {}}):
        with pytest.raises(gate.Invalid):
            gate.check_answer(bad)
    assert answer_of(new_message(bob_id.fingerprint, alice_id.fingerprint, "x", "receipt")) is None


def test_the_short_form_leaves_out_what_the_envelope_repeats_and_is_bound_to_it(
        alice_id: Identity, bob_id: Identity) -> None:
    real = new_message(alice_id.fingerprint, bob_id.fingerprint, "short and sweet", seq=7, hops=[])
    short = plaintext_of(real, short=True)
    assert real.id.encode() not in short and b"short and sweet" in short
    session, _ = session_pair()
    outer = opened(wrap(real, session.encrypt(short), None), alice_id, bob_id)
    assert unwrap(outer, short) == unwrap(outer, plaintext_of(real)) == Inner.from_json(real.to_json())
    renumbered = new_message(alice_id.fingerprint, bob_id.fingerprint, "short and sweet", seq=8, hops=[])
    for moved in (plaintext_of(renumbered, short=True),  # another message's short form
                  short.replace(b'"bind":"', b'"bind":"A')):  # a bind that is not 16 bytes
        with pytest.raises(TamperedMessage):
            unwrap(outer, moved)


@pytest.mark.parametrize(("kind", "ts", "seq"), [
    ("chat", "2026-12-05T04:37:33.123456Z", 7), ("group", "2026-12-05T04:37:33Z", None),
    ("chät", "2026-12-05T04:37:33Z", 1), ('a "quoted" kind', "2026-12-05\\T04", 2), ("tab\tkind", "x", None),
    ("del\x7fkind", "x", 3), ("line\u2028sep", "x", 4), ("\U0001f600 kind", "x", 5)])
def test_the_bind_is_the_hash_of_the_envelope_fields_as_canonical_json(
        alice_id: Identity, bob_id: Identity, kind: str, ts: str, seq: int | None) -> None:
    # The wire format peers of every version agree on, whether or not a field needs escaping.
    real = Inner("ab" * 16, alice_id.fingerprint, bob_id.fingerprint, ts, kind, "words", {"hops": []}, seq)
    fields = {k: v for k, v in real.to_json().items() if k in ENVELOPE_FIELDS}
    bind = hashlib.blake2b(BIND_CONTEXT + canonical_json(fields), digest_size=16).digest()
    short = json.loads(plaintext_of(real, short=True))
    assert short == {"hops": [], "text": "words", BIND_FIELD: base64.b64encode(bind).decode()}


def test_a_short_message_fits_the_smallest_bucket(alice_id: Identity, bob_id: Identity) -> None:
    real = new_message(alice_id.fingerprint, bob_id.fingerprint, "throughput probe 123", seq=12, hops=[])
    sender, receiver = vodozemac.Account(), vodozemac.Account()
    receiver.generate_one_time_keys(1)
    one_time = next(iter(receiver.one_time_keys.values()))
    first = sender.create_outbound_session(receiver.curve25519_key, one_time).encrypt(b"first").to_pre_key()
    assert first is not None
    session, _ = receiver.create_inbound_session(sender.curve25519_key, first)  # answers: normal messages
    plain = len(seal(real, alice_id.box_secret, bob_id.box_secret.public_key))
    long = wrap(real, session.encrypt(plaintext_of(real)), None)
    short = wrap(real, session.encrypt(plaintext_of(real, short=True)), None)
    assert len(seal(short, alice_id.box_secret, bob_id.box_secret.public_key)) == plain
    assert len(seal(long, alice_id.box_secret, bob_id.box_secret.public_key)) > plain
