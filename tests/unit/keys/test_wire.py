"""keys.wire: the owner-auth signature on relay requests: fresh, signed, whole."""

from __future__ import annotations

import time

import pytest

from keys.encoding import b64e
from keys.identity import Identity
from keys.wire import (
    AUTH_WINDOW_S,
    NONCE_HEADER,
    SIGNATURE_HEADER,
    TIME_HEADER,
    AuthVerdict,
    auth_headers,
    check_auth,
)

PATH = "/v1/mail/" + "ab" * 16 + "/fetch"
BODY = b'{"tags":["x"]}'


def test_check_auth_ok(alice_id: Identity) -> None:
    headers = auth_headers(alice_id.sign, "post", PATH, BODY)
    assert set(headers) == {TIME_HEADER, NONCE_HEADER, SIGNATURE_HEADER}
    now = time.time()
    assert check_auth(alice_id.sign_public, "POST", PATH, headers, BODY, now) is AuthVerdict.OK
    # At the edge of the window, still fine.
    edge = int(headers[TIME_HEADER]) + AUTH_WINDOW_S
    assert check_auth(alice_id.sign_public, "POST", PATH, headers, BODY, edge) is AuthVerdict.OK


def test_check_auth_stale(alice_id: Identity) -> None:
    headers = auth_headers(alice_id.sign, "POST", PATH, BODY)
    ts = int(headers[TIME_HEADER])
    for now in (ts + AUTH_WINDOW_S + 1, ts + 600, ts - AUTH_WINDOW_S - 1):
        verdict = check_auth(alice_id.sign_public, "POST", PATH, headers, BODY, now)
        assert verdict is AuthVerdict.STALE


def test_check_auth_bad_signature(alice_id: Identity, bob_id: Identity) -> None:
    now = time.time()
    headers = auth_headers(alice_id.sign, "POST", PATH, BODY)
    key = alice_id.sign_public
    assert check_auth(bob_id.sign_public, "POST", PATH, headers, BODY, now) is AuthVerdict.BAD_SIGNATURE
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
def test_check_auth_missing_or_malformed(alice_id: Identity, patch: dict[str, str | None]) -> None:
    headers = auth_headers(alice_id.sign, "POST", PATH, BODY)
    for name, value in patch.items():
        if value is None:
            del headers[name]
        else:
            headers[name] = value
    verdict = check_auth(alice_id.sign_public, "POST", PATH, headers, BODY, time.time())
    assert verdict is AuthVerdict.MISSING

