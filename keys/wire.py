"""The contract between the relay and its clients: routes' auth, limits, identifiers.

Owner requests (fetch, ack, invite slots, the push stream) carry three headers. The signature
is Ed25519, by the mailbox owner's signing key, over

    talk-auth-v1 \\n METHOD \\n PATH \\n TIME \\n NONCE \\n sha256(BODY) hex

so it binds the request to one route, one body and one moment; the relay refuses a time
outside its window and any nonce it has seen inside that window.

A client that makes many owner requests (the follower) first opens a session with one signed
request: the relay answers with a random session key sealed to the owner's box key, which only
the owner can open. Later requests name the session and carry a keyed BLAKE2b MAC of the same
payload instead of a signature, and count their nonces: an Ed25519 verify costs more than the
rest of a request, a MAC a microsecond. Sessions live in the relay process's memory only, so a
restart ends them all and no request from before it can be replayed.
"""

from __future__ import annotations

import time
from enum import StrEnum

from nacl.exceptions import BadSignatureError

from durable.digests import blake2b, compare_digest, sha256
from keys.encoding import b64d, b64e, token_hex
from keys.sodium import VerifyKey

__all__ = [
    "API",
    "AUTH_WINDOW_S",
    "NONCE_HEADER",
    "SESSION_HEADER",
    "SESSION_KEY_BYTES",
    "AuthVerdict",
    "auth_headers",
    "check_auth",
    "check_session_mac",
    "session_headers",
]

TIME_HEADER = "x-talk-time"
NONCE_HEADER = "x-talk-nonce"
SIGNATURE_HEADER = "x-talk-signature"
SESSION_HEADER = "x-talk-session"
MAC_HEADER = "x-talk-mac"
SESSION_KEY_BYTES = 32
AUTH_WINDOW_S = 120
API = "/v1"


class AuthVerdict(StrEnum):
    OK = "ok"
    MISSING = "missing"  # no or malformed auth headers
    STALE = "stale"  # time outside the window
    BAD_SIGNATURE = "bad_signature"


def signing_payload(method: str, path: str, ts: str, nonce: str, body: bytes) -> bytes:
    digest = sha256(body).hexdigest()
    return f"talk-auth-v1\n{method.upper()}\n{path}\n{ts}\n{nonce}\n{digest}".encode()


def auth_headers(sign: object, method: str, path: str, body: bytes) -> dict[str, str]:
    """Headers for an owner request; `sign` is a callable bytes → 64-byte signature."""
    ts, nonce = str(int(time.time())), token_hex(16)
    signature = sign(signing_payload(method, path, ts, nonce, body))  # type: ignore[operator]
    return {TIME_HEADER: ts, NONCE_HEADER: nonce, SIGNATURE_HEADER: b64e(signature)}


def session_mac(key: bytes, method: str, path: str, ts: str, nonce: str, body: bytes) -> bytes:
    return blake2b(signing_payload(method, path, ts, nonce, body), key=key, digest_size=32).digest()


def session_headers(
    session: str, key: bytes, counter: int, method: str, path: str, body: bytes
) -> dict[str, str]:
    """Headers for the `counter`-th owner request of a session (counted from 1): inside a
    session the nonce is that counter, so the relay's replay memory stays constant."""
    ts, nonce = str(int(time.time())), f"{counter:016d}"
    mac = session_mac(key, method, path, ts, nonce, body)
    return {TIME_HEADER: ts, NONCE_HEADER: nonce, SESSION_HEADER: session, MAC_HEADER: b64e(mac)}


def _time_and_nonce(headers: dict[str, str], now: float) -> AuthVerdict | None:
    ts, nonce = headers.get(TIME_HEADER, ""), headers.get(NONCE_HEADER, "")
    if not (ts.isascii() and ts.isdigit() and len(ts) <= 12 and 16 <= len(nonce) <= 64
            and nonce.isalnum()):
        return AuthVerdict.MISSING
    if abs(now - int(ts)) > AUTH_WINDOW_S:
        return AuthVerdict.STALE
    return None


def check_session_mac(
    key: bytes, method: str, path: str, headers: dict[str, str], body: bytes, now: float
) -> AuthVerdict:
    refused = _time_and_nonce(headers, now)
    if refused is not None:
        return refused
    if MAC_HEADER not in headers:
        return AuthVerdict.MISSING
    try:
        mac = b64d(headers[MAC_HEADER], 32)
    except ValueError:  # as for a signature: present but not the owner's
        return AuthVerdict.BAD_SIGNATURE
    expected = session_mac(key, method, path, headers[TIME_HEADER], headers[NONCE_HEADER], body)
    return AuthVerdict.OK if compare_digest(mac, expected) else AuthVerdict.BAD_SIGNATURE


def check_auth(
    sign_key: bytes, method: str, path: str, headers: dict[str, str], body: bytes, now: float
) -> AuthVerdict:
    refused = _time_and_nonce(headers, now)
    if refused is not None:
        return refused
    ts, nonce, sig = (headers.get(h, "") for h in (TIME_HEADER, NONCE_HEADER, SIGNATURE_HEADER))
    try:
        VerifyKey(sign_key).verify(signing_payload(method, path, ts, nonce, body), b64d(sig, 64))
    except (BadSignatureError, ValueError):
        return AuthVerdict.BAD_SIGNATURE
    return AuthVerdict.OK
