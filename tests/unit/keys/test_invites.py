"""keys.invites: invite codes, contact requests and the box proof that binds them."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from nacl.secret import SecretBox

from durable.errors import (
    InviteError,
    TamperedMessage,
)
from keys.encoding import HEX32
from keys.envelope import (
    pad,
)
from keys.identity import Identity, KeyBundle
from keys.invites import (
    KEEP_DAYS,
    InviteBook,
    InviteCode,
    box_proof,
    new_code,
    open_request,
    parse_code,
    seal_request,
)
from tests.peer_forge import borrowed_box_bundle


def test_invite_code_round_trip(alice_id: Identity) -> None:
    now = time.time()
    code = new_code(alice_id.fingerprint, 7, now)
    text = code.encode()
    assert text.startswith("talk-") and text == text.lower()
    assert parse_code(text) == code
    assert parse_code(f"  {text}\n") == code  # pasted with whitespace
    assert code.expires == int(now + 7 * 86400)
    assert not code.expired(now) and code.expired(code.expires)
    other = new_code(alice_id.fingerprint, 7, now)
    assert (other.tag, other.key) != (code.tag, code.key)
    assert HEX32.match(code.tag) and len(code.key) == 32


@pytest.mark.parametrize(
    "garbage",
    ["", "hello", "talk-", "talk-!!!!", "nope-" + "a" * 58, "talk-" + "a" * 57, "talk-" + "a" * 64],
)
def test_garbage_invite_code_is_an_invite_error(garbage: str) -> None:
    with pytest.raises(InviteError, match="not a talk invite code"):
        parse_code(garbage)


def test_truncated_invite_code_is_an_invite_error(alice_id: Identity) -> None:
    text = new_code(alice_id.fingerprint, 1, time.time()).encode()
    with pytest.raises(InviteError):
        parse_code(text[:-3])


@pytest.mark.parametrize("days", [0, -1, 365.5])
def test_invite_expiry_out_of_range_is_refused(alice_id: Identity, days: float) -> None:
    with pytest.raises(InviteError, match="between 0 and 365"):
        new_code(alice_id.fingerprint, days, time.time())


def joiner_request(code: InviteCode, joiner: Identity, inviter: Identity, request_id: str) -> bytes:
    """What `talk join` deposits: the joiner's bundle and its proof of the box key."""
    proof = box_proof(code, joiner.bundle(), joiner.box_secret, inviter.box_secret.public_key)
    return seal_request(code, joiner.bundle(), proof, request_id)


def test_contact_request_opens_only_with_its_code(alice_id: Identity, bob_id: Identity) -> None:
    code = new_code(alice_id.fingerprint, 7, time.time())
    blob = joiner_request(code, bob_id, alice_id, "1" * 32)
    request_id, bundle = open_request(code, blob, alice_id.box_secret)
    assert request_id == "1" * 32
    assert bundle == bob_id.bundle()
    bundle.check_against(bob_id.fingerprint)

    wrong = new_code(alice_id.fingerprint, 7, time.time())
    with pytest.raises(TamperedMessage):
        open_request(wrong, blob, alice_id.box_secret)
    flipped = bytearray(blob)
    flipped[-1] ^= 0x80
    with pytest.raises(TamperedMessage):
        open_request(code, bytes(flipped), alice_id.box_secret)


def test_contact_request_with_a_forged_bundle_is_tampered(alice_id: Identity, bob_id: Identity) -> None:
    code = InviteCode(alice_id.fingerprint, b"\x01" * 16, int(time.time()) + 60)
    forged = bob_id.bundle()._replace(name="notbob")
    proof = box_proof(code, forged, bob_id.box_secret, alice_id.box_secret.public_key)
    with pytest.raises(TamperedMessage, match="self-signature"):
        open_request(code, seal_request(code, forged, proof, "2" * 32), alice_id.box_secret)


def test_box_proof_is_symmetric_and_bound_to_invite_and_keys(
    alice_id: Identity, bob_id: Identity, carol_id: Identity
) -> None:
    code = new_code(alice_id.fingerprint, 7, time.time())
    made = box_proof(code, bob_id.bundle(), bob_id.box_secret, alice_id.box_secret.public_key)
    assert made == box_proof(code, bob_id.bundle(), alice_id.box_secret, bob_id.box_secret.public_key)
    assert len(made) == 32
    other_code = new_code(alice_id.fingerprint, 7, time.time())
    assert made != box_proof(other_code, bob_id.bundle(), bob_id.box_secret, alice_id.box_secret.public_key)
    assert made != box_proof(code, carol_id.bundle(), bob_id.box_secret, alice_id.box_secret.public_key)
    # Only the two box secrets of the agreement make it: a third party's gives another value.
    assert made != box_proof(code, bob_id.bundle(), carol_id.box_secret, alice_id.box_secret.public_key)


def test_a_bundle_with_a_borrowed_box_key_cannot_prove_it(
    alice_id: Identity, bob_id: Identity, carol_id: Identity
) -> None:
    """carol signs her own sign key beside bob's box key: self-signed, but her proof (made with
    the box secret she has) does not check against the box key she claims."""
    code = new_code(alice_id.fingerprint, 7, time.time())
    crafted = borrowed_box_bundle(carol_id, bob_id)
    assert crafted.self_signed()
    proof = box_proof(code, crafted, carol_id.box_secret, alice_id.box_secret.public_key)
    with pytest.raises(TamperedMessage, match="does not hold"):
        open_request(code, seal_request(code, crafted, proof, "3" * 32), alice_id.box_secret)


def test_a_proof_for_another_invite_or_missing_is_refused(alice_id: Identity, bob_id: Identity) -> None:
    code = new_code(alice_id.fingerprint, 7, time.time())
    earlier = new_code(alice_id.fingerprint, 7, time.time())
    replayed = box_proof(earlier, bob_id.bundle(), bob_id.box_secret, alice_id.box_secret.public_key)
    with pytest.raises(TamperedMessage, match="does not hold"):
        open_request(code, seal_request(code, bob_id.bundle(), replayed, "4" * 32), alice_id.box_secret)
    body = {"v": 1, "kind": "contact_request", "id": "6" * 32, "bundle": bob_id.bundle().to_json()}
    bare = bytes(SecretBox(code.key).encrypt(pad(json.dumps(body).encode())))
    with pytest.raises(TamperedMessage, match="no proof"):
        open_request(code, bare, alice_id.box_secret)
    body["box_proof"] = "not base64!"
    garbled = bytes(SecretBox(code.key).encrypt(pad(json.dumps(body).encode())))
    with pytest.raises(TamperedMessage):
        open_request(code, garbled, alice_id.box_secret)


def test_a_request_naming_a_degenerate_box_key_is_refused(alice_id: Identity) -> None:
    code = new_code(alice_id.fingerprint, 7, time.time())
    signer = Identity.generate("zero")
    unsigned = KeyBundle("zero", signer.sign_public, bytes(32), b"\0" * 64)
    crafted = unsigned._replace(signature=signer.sign(unsigned.signed_part()))
    with pytest.raises(TamperedMessage, match="does not hold"):
        open_request(code, seal_request(code, crafted, bytes(32), "5" * 32), alice_id.box_secret)


def test_invites_that_ended_a_month_ago_are_forgotten_when_a_new_one_is_made(tmp_path: Path) -> None:
    book = InviteBook(tmp_path)
    me = Identity.generate("me").fingerprint
    now = time.time()
    long_gone = new_code(me, 1, now - (KEEP_DAYS + 2) * 86400)
    book.add(long_gone)
    assert set(book.all()) == {long_gone.tag}
    recent = new_code(me, 1, now - 86400)
    fresh = new_code(me, 7, now)
    book.add(recent)
    book.add(fresh)
    assert set(book.all()) == {recent.tag, fresh.tag}
    assert [c.tag for c in book.live(now)] == [fresh.tag]




def test_a_contact_request_nested_past_the_limit_is_tampered(alice_id: Identity) -> None:
    code = new_code(alice_id.fingerprint, 7, time.time())
    blob = bytes(SecretBox(code.key).encrypt(pad(b"[" * 20_000 + b"]" * 20_000)))
    with pytest.raises(TamperedMessage, match="did not open"):
        open_request(code, blob, alice_id.box_secret)
