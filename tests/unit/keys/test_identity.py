"""keys.identity: fingerprints, and self-signed key bundles checked against a pin."""

from __future__ import annotations

import json

import pytest

from durable.errors import (
    PinMismatch,
    UserError,
)
from keys.encoding import HEX32, b64e
from keys.identity import Identity, KeyBundle, fingerprint, parse_fingerprint


def test_fingerprint_is_32_lowercase_hex_and_stable(alice_id: Identity) -> None:
    fp = alice_id.fingerprint
    assert HEX32.match(fp)
    assert fp == fingerprint(alice_id.sign_public, alice_id.box_public)
    assert fp == alice_id.bundle().fingerprint
    again = Identity.from_secret("renamed", alice_id.secret_bytes())
    assert again.fingerprint == fp  # names both keys, not the name


def test_fingerprints_differ_between_identities(alice_id: Identity, bob_id: Identity) -> None:
    assert alice_id.fingerprint != bob_id.fingerprint
    # Both keys count: swapping in another box key changes the fingerprint.
    assert fingerprint(alice_id.sign_public, bob_id.box_public) != alice_id.fingerprint


def test_parse_fingerprint_normalises_and_refuses(alice_id: Identity) -> None:
    fp = alice_id.fingerprint
    spaced = " ".join(fp[i : i + 4] for i in range(0, 32, 4)).upper()
    assert parse_fingerprint(spaced) == fp
    assert parse_fingerprint(":".join(fp[i : i + 2] for i in range(0, 32, 2))) == fp
    for bad in (fp[:-1], fp + "0", "g" * 32, ""):
        with pytest.raises(UserError, match="not a fingerprint"):
            parse_fingerprint(bad)


def test_bundle_is_self_signed_and_round_trips(alice_id: Identity) -> None:
    bundle = alice_id.bundle()
    assert bundle.self_signed()
    data = json.loads(json.dumps(bundle.to_json()))
    assert set(data) == {"name", "sign_key", "box_key", "signature", "kem"}
    parsed = KeyBundle.from_json(data)
    assert parsed == bundle
    parsed.check_against(alice_id.fingerprint)  # no exception: the keys hash to the pin


def test_check_against_another_fingerprint_is_a_pin_mismatch(
    alice_id: Identity, bob_id: Identity
) -> None:
    with pytest.raises(PinMismatch, match="PIN MISMATCH"):
        alice_id.bundle().check_against(bob_id.fingerprint)


def test_check_against_a_tampered_name_is_a_pin_mismatch(alice_id: Identity) -> None:
    forged = alice_id.bundle()._replace(name="mallory")
    assert forged.fingerprint == alice_id.fingerprint  # same keys, so only the signature catches it
    assert not forged.self_signed()
    with pytest.raises(PinMismatch):
        forged.check_against(alice_id.fingerprint)


def test_check_against_a_substituted_box_key_is_a_pin_mismatch(
    alice_id: Identity, carol_id: Identity
) -> None:
    # A relay keeps alice's signing key and signature but serves its own box key.
    forged = alice_id.bundle()._replace(box_key=carol_id.box_public)
    with pytest.raises(PinMismatch):
        forged.check_against(alice_id.fingerprint)
    # A bundle self-signed by the attacker under alice's name is refused too.
    impostor = Identity.from_secret("alice", carol_id.secret_bytes()).bundle()
    assert impostor.self_signed()
    with pytest.raises(PinMismatch):
        impostor.check_against(alice_id.fingerprint)


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
def test_bundle_from_json_refuses_malformed_fields(alice_id: Identity, patch: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        KeyBundle.from_json({**alice_id.bundle().to_json(), **patch})


