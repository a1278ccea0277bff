"""Unit tests of `keys/`: identities, the sealed envelope, invite codes, the keystore, safety
numbers and the owner-auth contract. No network, no relay; only real keys and real files."""

from __future__ import annotations

import base64
import dataclasses
import json
import re
import stat
import time
from pathlib import Path

import pytest
from nacl.secret import SecretBox

from durable.errors import (
    InviteError,
    KeyInUse,
    MessageTooLarge,
    PinMismatch,
    TamperedMessage,
    UnknownSender,
    UserError,
)
from durable.home import IDENTITY_FILE
from keys import keystore
from keys.contacts import ContactBook, Source, free_name, pinned_contact
from keys.encoding import HEX32, b64e
from keys.envelope import (
    BUCKETS,
    MAX_BLOB,
    MAX_PADDED,
    OVERHEAD,
    Inner,
    channel_tag,
    new_message,
    open_blob,
    pad,
    seal,
)
from keys.identity import Identity, KeyBundle, fingerprint, parse_fingerprint
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
from keys.safety import safety_number
from keys.wire import (
    AUTH_WINDOW_S,
    NONCE_HEADER,
    SIGNATURE_HEADER,
    TIME_HEADER,
    AuthVerdict,
    auth_headers,
    check_auth,
)

SAFETY_FORMAT = re.compile(r"^\d{5}( \d{5}){11}$")


@pytest.fixture(scope="module")
def alice() -> Identity:
    return Identity.generate("alice")


@pytest.fixture(scope="module")
def bob() -> Identity:
    return Identity.generate("bob")


@pytest.fixture(scope="module")
def carol() -> Identity:
    return Identity.generate("carol")


def contacts_of(*peers: Identity) -> dict[bytes, list[str]]:
    """What a pinned contact book answers: box key → the fingerprints pinned with it."""
    pinned: dict[bytes, list[str]] = {}
    for p in peers:
        pinned.setdefault(p.box_public, []).append(p.fingerprint)
    return pinned


def open_as(
    recipient: Identity, blob: bytes, pinned: dict[bytes, list[str]], own_fp: str | None = None
) -> tuple[str, Inner]:
    return open_blob(
        blob, recipient.box_secret, own_fp or recipient.fingerprint,
        lambda key: pinned.get(key, []), lambda fp: fp,
    )


def sealed_text(sender: Identity, recipient: Identity, text: str) -> bytes:
    inner = new_message(sender.fingerprint, recipient.fingerprint, text)
    return seal(inner, sender.box_secret, recipient.box_secret.public_key)


# ---------------------------------------------------------------- identity and fingerprint


def test_fingerprint_is_32_lowercase_hex_and_stable(alice: Identity) -> None:
    fp = alice.fingerprint
    assert HEX32.match(fp)
    assert fp == fingerprint(alice.sign_public, alice.box_public)
    assert fp == alice.bundle().fingerprint
    again = Identity.from_secret("renamed", alice.secret_bytes())
    assert again.fingerprint == fp  # names both keys, not the name


def test_fingerprints_differ_between_identities(alice: Identity, bob: Identity) -> None:
    assert alice.fingerprint != bob.fingerprint
    # Both keys count: swapping in another box key changes the fingerprint.
    assert fingerprint(alice.sign_public, bob.box_public) != alice.fingerprint


def test_parse_fingerprint_normalises_and_refuses(alice: Identity) -> None:
    fp = alice.fingerprint
    spaced = " ".join(fp[i : i + 4] for i in range(0, 32, 4)).upper()
    assert parse_fingerprint(spaced) == fp
    assert parse_fingerprint(":".join(fp[i : i + 2] for i in range(0, 32, 2))) == fp
    for bad in (fp[:-1], fp + "0", "g" * 32, ""):
        with pytest.raises(UserError, match="not a fingerprint"):
            parse_fingerprint(bad)


def test_bundle_is_self_signed_and_round_trips(alice: Identity) -> None:
    bundle = alice.bundle()
    assert bundle.self_signed()
    data = json.loads(json.dumps(bundle.to_json()))
    assert set(data) == {"name", "sign_key", "box_key", "signature"}
    parsed = KeyBundle.from_json(data)
    assert parsed == bundle
    parsed.check_against(alice.fingerprint)  # no exception: the keys hash to the pin


def test_check_against_another_fingerprint_is_a_pin_mismatch(
    alice: Identity, bob: Identity
) -> None:
    with pytest.raises(PinMismatch, match="PIN MISMATCH"):
        alice.bundle().check_against(bob.fingerprint)


def test_check_against_a_tampered_name_is_a_pin_mismatch(alice: Identity) -> None:
    forged = alice.bundle()._replace(name="mallory")
    assert forged.fingerprint == alice.fingerprint  # same keys, so only the signature catches it
    assert not forged.self_signed()
    with pytest.raises(PinMismatch):
        forged.check_against(alice.fingerprint)


def test_check_against_a_substituted_box_key_is_a_pin_mismatch(
    alice: Identity, carol: Identity
) -> None:
    # A relay keeps alice's signing key and signature but serves its own box key.
    forged = alice.bundle()._replace(box_key=carol.box_public)
    with pytest.raises(PinMismatch):
        forged.check_against(alice.fingerprint)
    # A bundle self-signed by the attacker under alice's name is refused too.
    impostor = Identity.from_secret("alice", carol.secret_bytes()).bundle()
    assert impostor.self_signed()
    with pytest.raises(PinMismatch):
        impostor.check_against(alice.fingerprint)


@pytest.mark.parametrize(
    "patch",
    [
        {"name": ""},
        {"name": 7},
        {"sign_key": "not base64!"},
        {"box_key": b64e(b"short")},
        {"signature": None},
    ],
    ids=["empty-name", "int-name", "bad-b64", "short-key", "no-signature"],
)
def test_bundle_from_json_refuses_malformed_fields(alice: Identity, patch: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        KeyBundle.from_json({**alice.bundle().to_json(), **patch})


# ---------------------------------------------------------------- the sealed envelope


def test_seal_open_round_trip(alice: Identity, bob: Identity) -> None:
    inner = new_message(alice.fingerprint, bob.fingerprint, "héllo bob ✓", kind="chat", thread="t1")
    blob = seal(inner, alice.box_secret, bob.box_secret.public_key)
    assert "héllo".encode() not in blob
    sender, opened = open_as(bob, blob, contacts_of(alice))
    assert sender == alice.fingerprint
    # The gate passes on only the fields it knows: "thread" is dropped, never handed on.
    assert opened == dataclasses.replace(inner, extra={})


def test_open_with_the_wrong_recipient_key_is_tampered(
    alice: Identity, bob: Identity, carol: Identity
) -> None:
    blob = sealed_text(alice, bob, "for bob only")
    with pytest.raises(TamperedMessage):
        open_as(carol, blob, contacts_of(alice))


@pytest.mark.parametrize("where", [0, 31, 40, 100, -17, -1])
def test_one_flipped_byte_is_tampered(alice: Identity, bob: Identity, where: int) -> None:
    blob = bytearray(sealed_text(alice, bob, "integrity"))
    blob[where] ^= 0x01
    with pytest.raises(TamperedMessage):
        open_as(bob, bytes(blob), contacts_of(alice))


def test_truncated_blob_is_tampered(alice: Identity, bob: Identity) -> None:
    blob = sealed_text(alice, bob, "cut short")
    for cut in (blob[:-1], blob[:40], b""):
        with pytest.raises(TamperedMessage):
            open_as(bob, cut, contacts_of(alice))


def test_sender_not_pinned_is_unknown(alice: Identity, bob: Identity, carol: Identity) -> None:
    blob = sealed_text(alice, bob, "who am I")
    with pytest.raises(UnknownSender):
        open_as(bob, blob, contacts_of(carol))


def test_inner_recipient_not_ours_is_tampered(
    alice: Identity, bob: Identity, carol: Identity
) -> None:
    # Sealed to bob's key, but the signed-in-the-box header says it is for carol: a forward.
    inner = new_message(alice.fingerprint, carol.fingerprint, "meant for carol")
    blob = seal(inner, alice.box_secret, bob.box_secret.public_key)
    with pytest.raises(TamperedMessage, match="wrong sender or recipient"):
        open_as(bob, blob, contacts_of(alice))


def test_inner_sender_not_the_sealing_key_is_tampered(
    alice: Identity, bob: Identity, carol: Identity
) -> None:
    # alice seals with her own key but claims to be carol, whom bob also pins.
    inner = new_message(carol.fingerprint, bob.fingerprint, "I am carol, honest")
    blob = seal(inner, alice.box_secret, bob.box_secret.public_key)
    with pytest.raises(TamperedMessage):
        open_as(bob, blob, contacts_of(alice, carol))


def test_mail_goes_to_the_contact_its_sealed_sender_names(
    alice: Identity, bob: Identity, carol: Identity
) -> None:
    """Two pins share bob's box key (a book from before `pin` refused that): bob's mail is
    bob's whichever pin comes first, and the pin's maker cannot write as it."""
    impostor = borrowed_box_bundle(carol, bob).fingerprint
    pinned = {bob.box_public: [impostor, bob.fingerprint]}
    assert open_as(alice, sealed_text(bob, alice, "from bob"), pinned)[0] == bob.fingerprint
    reordered = {bob.box_public: [bob.fingerprint, impostor]}
    assert open_as(alice, sealed_text(bob, alice, "again"), reordered)[0] == bob.fingerprint
    from_carol = seal(new_message(impostor, alice.fingerprint, "hi"), carol.box_secret,
                      alice.box_secret.public_key)
    with pytest.raises(UnknownSender):
        open_as(alice, from_carol, pinned)


def framing(sender: Identity, recipient: Identity) -> int:
    """Bytes of inner JSON around the text (ids, time, kind): about 180."""
    empty = new_message(sender.fingerprint, recipient.fingerprint, "").to_json()
    return len(json.dumps(empty, ensure_ascii=False, separators=(",", ":")))


def test_padding_hides_length_within_a_bucket(alice: Identity, bob: Identity) -> None:
    room = BUCKETS[0] - 1 - framing(alice, bob)  # the longest text the first bucket holds
    assert 300 <= room < 400
    sizes = {len(sealed_text(alice, bob, "x" * n)) for n in (1, 100, room)}
    assert sizes == {BUCKETS[0] + OVERHEAD}
    # One byte more moves to the next bucket, where 400 and 1000 characters look the same.
    second = BUCKETS[1] + OVERHEAD
    assert len(sealed_text(alice, bob, "x" * (room + 1))) == second
    assert len(sealed_text(alice, bob, "y" * 400)) == len(sealed_text(alice, bob, "z" * 1000))
    assert len(sealed_text(alice, bob, "y" * 400)) == second


def test_largest_message_fills_the_relay_blob_limit(alice: Identity, bob: Identity) -> None:
    text = "a" * (MAX_PADDED - 1 - framing(alice, bob))
    biggest = sealed_text(alice, bob, text)
    assert len(biggest) == MAX_BLOB
    assert open_as(bob, biggest, contacts_of(alice))[1].text == text
    with pytest.raises(MessageTooLarge):
        sealed_text(alice, bob, text + "a")


def test_text_over_the_limit_is_too_large(alice: Identity, bob: Identity) -> None:
    with pytest.raises(MessageTooLarge, match="limit"):
        sealed_text(alice, bob, "a" * MAX_PADDED)


def test_channel_tag_is_shared_by_both_ends_and_differs_by_direction(
    alice: Identity, bob: Identity, carol: Identity
) -> None:
    to_bob_by_alice = channel_tag(alice.box_secret, bob.box_secret.public_key, bob.fingerprint)
    to_bob_by_bob = channel_tag(bob.box_secret, alice.box_secret.public_key, bob.fingerprint)
    assert to_bob_by_alice == to_bob_by_bob
    assert HEX32.match(to_bob_by_alice)
    to_alice = channel_tag(bob.box_secret, alice.box_secret.public_key, alice.fingerprint)
    assert to_alice == channel_tag(alice.box_secret, bob.box_secret.public_key, alice.fingerprint)
    assert to_alice != to_bob_by_alice
    # Another pair's channel to the same recipient has its own tag.
    assert channel_tag(carol.box_secret, bob.box_secret.public_key, bob.fingerprint) not in {
        to_bob_by_alice, to_alice
    }


# ---------------------------------------------------------------- invite codes


def test_invite_code_round_trip(alice: Identity) -> None:
    now = time.time()
    code = new_code(alice.fingerprint, 7, now)
    text = code.encode()
    assert text.startswith("talk-") and text == text.lower()
    assert parse_code(text) == code
    assert parse_code(f"  {text}\n") == code  # pasted with whitespace
    assert code.expires == int(now + 7 * 86400)
    assert not code.expired(now) and code.expired(code.expires)
    other = new_code(alice.fingerprint, 7, now)
    assert (other.tag, other.key) != (code.tag, code.key)
    assert HEX32.match(code.tag) and len(code.key) == 32


@pytest.mark.parametrize(
    "garbage",
    ["", "hello", "talk-", "talk-!!!!", "nope-" + "a" * 58, "talk-" + "a" * 57, "talk-" + "a" * 64],
)
def test_garbage_invite_code_is_an_invite_error(garbage: str) -> None:
    with pytest.raises(InviteError, match="not a talk invite code"):
        parse_code(garbage)


def test_truncated_invite_code_is_an_invite_error(alice: Identity) -> None:
    text = new_code(alice.fingerprint, 1, time.time()).encode()
    with pytest.raises(InviteError):
        parse_code(text[:-3])


@pytest.mark.parametrize("days", [0, -1, 365.5])
def test_invite_expiry_out_of_range_is_refused(alice: Identity, days: float) -> None:
    with pytest.raises(InviteError, match="between 0 and 365"):
        new_code(alice.fingerprint, days, time.time())


def joiner_request(code: InviteCode, joiner: Identity, inviter: Identity, request_id: str) -> bytes:
    """What `talk join` deposits: the joiner's bundle and its proof of the box key."""
    proof = box_proof(code, joiner.bundle(), joiner.box_secret, inviter.box_secret.public_key)
    return seal_request(code, joiner.bundle(), proof, request_id)


def test_contact_request_opens_only_with_its_code(alice: Identity, bob: Identity) -> None:
    code = new_code(alice.fingerprint, 7, time.time())
    blob = joiner_request(code, bob, alice, "1" * 32)
    request_id, bundle = open_request(code, blob, alice.box_secret)
    assert request_id == "1" * 32
    assert bundle == bob.bundle()
    bundle.check_against(bob.fingerprint)

    wrong = new_code(alice.fingerprint, 7, time.time())
    with pytest.raises(TamperedMessage):
        open_request(wrong, blob, alice.box_secret)
    flipped = bytearray(blob)
    flipped[-1] ^= 0x80
    with pytest.raises(TamperedMessage):
        open_request(code, bytes(flipped), alice.box_secret)


def test_contact_request_with_a_forged_bundle_is_tampered(alice: Identity, bob: Identity) -> None:
    code = InviteCode(alice.fingerprint, b"\x01" * 16, int(time.time()) + 60)
    forged = bob.bundle()._replace(name="notbob")
    proof = box_proof(code, forged, bob.box_secret, alice.box_secret.public_key)
    with pytest.raises(TamperedMessage, match="self-signature"):
        open_request(code, seal_request(code, forged, proof, "2" * 32), alice.box_secret)


def borrowed_box_bundle(owner: Identity, box_of: Identity) -> KeyBundle:
    """A bundle self-signed by `owner` around someone else's box key: signs, but owns no box."""
    unsigned = KeyBundle(owner.name, owner.sign_public, box_of.box_public, b"\0" * 64)
    return unsigned._replace(signature=owner.sign(unsigned.signed_part()))


def test_box_proof_is_symmetric_and_bound_to_invite_and_keys(
    alice: Identity, bob: Identity, carol: Identity
) -> None:
    code = new_code(alice.fingerprint, 7, time.time())
    made = box_proof(code, bob.bundle(), bob.box_secret, alice.box_secret.public_key)
    assert made == box_proof(code, bob.bundle(), alice.box_secret, bob.box_secret.public_key)
    assert len(made) == 32
    other_code = new_code(alice.fingerprint, 7, time.time())
    assert made != box_proof(other_code, bob.bundle(), bob.box_secret, alice.box_secret.public_key)
    assert made != box_proof(code, carol.bundle(), bob.box_secret, alice.box_secret.public_key)
    # Only the two box secrets of the agreement make it: a third party's gives another value.
    assert made != box_proof(code, bob.bundle(), carol.box_secret, alice.box_secret.public_key)


def test_a_bundle_with_a_borrowed_box_key_cannot_prove_it(
    alice: Identity, bob: Identity, carol: Identity
) -> None:
    """carol signs her own sign key beside bob's box key: self-signed, but her proof (made with
    the box secret she has) does not check against the box key she claims."""
    code = new_code(alice.fingerprint, 7, time.time())
    crafted = borrowed_box_bundle(carol, bob)
    assert crafted.self_signed()
    proof = box_proof(code, crafted, carol.box_secret, alice.box_secret.public_key)
    with pytest.raises(TamperedMessage, match="does not hold"):
        open_request(code, seal_request(code, crafted, proof, "3" * 32), alice.box_secret)


def test_a_proof_for_another_invite_or_missing_is_refused(alice: Identity, bob: Identity) -> None:
    code = new_code(alice.fingerprint, 7, time.time())
    earlier = new_code(alice.fingerprint, 7, time.time())
    replayed = box_proof(earlier, bob.bundle(), bob.box_secret, alice.box_secret.public_key)
    with pytest.raises(TamperedMessage, match="does not hold"):
        open_request(code, seal_request(code, bob.bundle(), replayed, "4" * 32), alice.box_secret)
    body = {"v": 1, "kind": "contact_request", "id": "6" * 32, "bundle": bob.bundle().to_json()}
    bare = bytes(SecretBox(code.key).encrypt(pad(json.dumps(body).encode())))
    with pytest.raises(TamperedMessage, match="no proof"):
        open_request(code, bare, alice.box_secret)
    body["box_proof"] = "not base64!"
    garbled = bytes(SecretBox(code.key).encrypt(pad(json.dumps(body).encode())))
    with pytest.raises(TamperedMessage):
        open_request(code, garbled, alice.box_secret)


def test_a_request_naming_a_degenerate_box_key_is_refused(alice: Identity) -> None:
    code = new_code(alice.fingerprint, 7, time.time())
    signer = Identity.generate("zero")
    unsigned = KeyBundle("zero", signer.sign_public, bytes(32), b"\0" * 64)
    crafted = unsigned._replace(signature=signer.sign(unsigned.signed_part()))
    with pytest.raises(TamperedMessage, match="does not hold"):
        open_request(code, seal_request(code, crafted, bytes(32), "5" * 32), alice.box_secret)


# ---------------------------------------------------------------- keystore


def secret_forms(identity: Identity) -> list[bytes]:
    seed, box = bytes(identity.signing_key), bytes(identity.box_secret)
    forms = []
    for raw in (seed, box, identity.secret_bytes()):
        forms += [raw, raw.hex().encode(), base64.b64encode(raw), base64.urlsafe_b64encode(raw)]
        forms.append(base64.b64encode(raw).rstrip(b"="))
    return forms


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
    alice, carol = Identity.generate("alice"), Identity.generate("carol")
    folder = keystore.create(tmp_path, alice, None, "http://127.0.0.1:1")
    path = folder / IDENTITY_FILE
    raw = json.loads(path.read_text())
    raw["box_key"] = b64e(carol.box_public)
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


# ---------------------------------------------------------------- contacts


def test_contact_book_pins_once_and_keeps_names_apart(
    tmp_path: Path, alice: Identity, bob: Identity
) -> None:
    book = ContactBook(tmp_path)
    pinned = book.pin(pinned_contact("bob", bob.bundle(), Source.ADDED))
    assert book.get("bob") == pinned == book.get(bob.fingerprint)
    assert book.with_box_key(bob.box_public) == [pinned]
    # Re-pinning the same keys under another name returns the stored contact unchanged.
    assert book.pin(pinned_contact("robert", bob.bundle(), Source.JOINED)) == pinned
    with pytest.raises(UserError, match="already used"):
        book.pin(pinned_contact("bob", alice.bundle(), Source.ADDED))
    assert free_name("bob", {"bob", "bob-2"}) == "bob-3"
    assert [c.name for c in book.all()] == ["bob"]


@pytest.mark.parametrize("source", list(Source))
def test_contact_book_refuses_a_key_pinned_to_another_contact(
    tmp_path: Path, alice: Identity, bob: Identity, carol: Identity, source: Source
) -> None:
    book = ContactBook(tmp_path)
    book.pin(pinned_contact("bob", bob.bundle(), Source.INVITED))
    before = (tmp_path / "contacts.json").read_bytes()
    borrowed_box = borrowed_box_bundle(carol, bob)
    clash = r"box key is already pinned to your contact 'bob' \(" + bob.fingerprint
    with pytest.raises(KeyInUse, match=clash):
        book.pin(pinned_contact("carol", borrowed_box, source))
    with pytest.raises(KeyInUse, match="refused to join " + borrowed_box.fingerprint):
        book.check_free(borrowed_box, "to join")
    borrowed_sign = KeyBundle("bob2", bob.sign_public, carol.box_public, b"\0" * 64)
    with pytest.raises(KeyInUse, match="sign key is already pinned to your contact 'bob'"):
        book.pin(pinned_contact("bob2", borrowed_sign, source))
    assert (tmp_path / "contacts.json").read_bytes() == before
    book.check_free(bob.bundle())  # the same keys again are not a clash
    book.check_free(alice.bundle())


# ---------------------------------------------------------------- safety numbers


def test_safety_number_is_symmetric_and_well_formed(
    alice: Identity, bob: Identity, carol: Identity
) -> None:
    number = safety_number(alice.fingerprint, bob.fingerprint)
    assert number == safety_number(bob.fingerprint, alice.fingerprint)
    assert SAFETY_FORMAT.match(number), number
    assert len(number.split()) == 12
    assert safety_number(alice.fingerprint, carol.fingerprint) != number


# ---------------------------------------------------------------- owner auth (keys.wire)

PATH = "/v1/mail/" + "ab" * 16 + "/fetch"
BODY = b'{"tags":["x"]}'


def test_check_auth_ok(alice: Identity) -> None:
    headers = auth_headers(alice.sign, "post", PATH, BODY)
    assert set(headers) == {TIME_HEADER, NONCE_HEADER, SIGNATURE_HEADER}
    now = time.time()
    assert check_auth(alice.sign_public, "POST", PATH, headers, BODY, now) is AuthVerdict.OK
    # At the edge of the window, still fine.
    edge = int(headers[TIME_HEADER]) + AUTH_WINDOW_S
    assert check_auth(alice.sign_public, "POST", PATH, headers, BODY, edge) is AuthVerdict.OK


def test_check_auth_stale(alice: Identity) -> None:
    headers = auth_headers(alice.sign, "POST", PATH, BODY)
    ts = int(headers[TIME_HEADER])
    for now in (ts + AUTH_WINDOW_S + 1, ts + 600, ts - AUTH_WINDOW_S - 1):
        verdict = check_auth(alice.sign_public, "POST", PATH, headers, BODY, now)
        assert verdict is AuthVerdict.STALE


def test_check_auth_bad_signature(alice: Identity, bob: Identity) -> None:
    now = time.time()
    headers = auth_headers(alice.sign, "POST", PATH, BODY)
    key = alice.sign_public
    assert check_auth(bob.sign_public, "POST", PATH, headers, BODY, now) is AuthVerdict.BAD_SIGNATURE
    assert check_auth(key, "PUT", PATH, headers, BODY, now) is AuthVerdict.BAD_SIGNATURE
    assert check_auth(key, "POST", PATH + "x", headers, BODY, now) is AuthVerdict.BAD_SIGNATURE
    assert check_auth(key, "POST", PATH, headers, BODY + b" ", now) is AuthVerdict.BAD_SIGNATURE
    other_nonce = {**headers, NONCE_HEADER: "f" * 32}
    assert check_auth(key, "POST", PATH, other_nonce, BODY, now) is AuthVerdict.BAD_SIGNATURE
    for sig in ("", "not base64", b64e(b"\0" * 63), b64e(b"\0" * 64)):
        forged = {**headers, SIGNATURE_HEADER: sig}
        assert check_auth(key, "POST", PATH, forged, BODY, now) is AuthVerdict.BAD_SIGNATURE


@pytest.mark.parametrize(
    "patch",
    [
        {TIME_HEADER: None, NONCE_HEADER: None, SIGNATURE_HEADER: None},
        {TIME_HEADER: None},
        {NONCE_HEADER: None},
        {TIME_HEADER: ""},
        {TIME_HEADER: "-5"},
        {TIME_HEADER: "12.5"},
        {TIME_HEADER: "\u00b2\u00b2"},  # superscript digits: str.isdigit() but not int()-able
        {TIME_HEADER: "9" * 400},  # a time too long to be one
        {NONCE_HEADER: "abc"},
        {NONCE_HEADER: "a" * 65},
        {NONCE_HEADER: "nonce-with-dashes"},
    ],
    ids=[
        "none", "no-time", "no-nonce", "empty-time", "negative-time", "fraction-time",
        "superscript-time", "huge-time", "short-nonce", "long-nonce", "dashed-nonce",
    ],
)
def test_check_auth_missing_or_malformed(alice: Identity, patch: dict[str, str | None]) -> None:
    headers = auth_headers(alice.sign, "POST", PATH, BODY)
    for name, value in patch.items():
        if value is None:
            del headers[name]
        else:
            headers[name] = value
    verdict = check_auth(alice.sign_public, "POST", PATH, headers, BODY, time.time())
    assert verdict is AuthVerdict.MISSING


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
