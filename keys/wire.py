"""The contract between the relay and its clients: routes' auth, limits, identifiers.

Owner requests (fetch, ack, invite slots, the push stream) carry three headers. The signature
is Ed25519, by the mailbox owner's signing key, over

    talk-auth-v1 \\n METHOD \\n PATH \\n TIME \\n NONCE \\n sha256(BODY) hex

so it binds the request to one route, one body and one moment; the relay refuses a time
outside its window and any nonce it has seen inside that window.
"""

from __future__ import annotations

import hashlib
import secrets
import time
from enum import StrEnum

from nacl.exceptions import BadSignatureError
from nacl.signing import VerifyKey

from keys.encoding import b64d, b64e

TIME_HEADER = "x-talk-time"
NONCE_HEADER = "x-talk-nonce"
SIGNATURE_HEADER = "x-talk-signature"
AUTH_WINDOW_S = 120
API = "/v1"


class AuthVerdict(StrEnum):
    OK = "ok"
    MISSING = "missing"  # no or malformed auth headers
    STALE = "stale"  # time outside the window
    BAD_SIGNATURE = "bad_signature"


def signing_payload(method: str, path: str, ts: str, nonce: str, body: bytes) -> bytes:
    digest = hashlib.sha256(body).hexdigest()
    return f"talk-auth-v1\n{method.upper()}\n{path}\n{ts}\n{nonce}\n{digest}".encode()


def auth_headers(sign: object, method: str, path: str, body: bytes) -> dict[str, str]:
    """Headers for an owner request; `sign` is a callable bytes → 64-byte signature."""
    ts, nonce = str(int(time.time())), secrets.token_hex(16)
    signature = sign(signing_payload(method, path, ts, nonce, body))  # type: ignore[operator]
    return {TIME_HEADER: ts, NONCE_HEADER: nonce, SIGNATURE_HEADER: b64e(signature)}


def check_auth(
    sign_key: bytes, method: str, path: str, headers: dict[str, str], body: bytes, now: float
) -> AuthVerdict:
    ts, nonce, sig = (headers.get(h, "") for h in (TIME_HEADER, NONCE_HEADER, SIGNATURE_HEADER))
    if not (ts.isascii() and ts.isdigit() and len(ts) <= 12 and 16 <= len(nonce) <= 64
            and nonce.isalnum()):
        return AuthVerdict.MISSING
    if abs(now - int(ts)) > AUTH_WINDOW_S:
        return AuthVerdict.STALE
    try:
        VerifyKey(sign_key).verify(signing_payload(method, path, ts, nonce, body), b64d(sig, 64))
    except (BadSignatureError, ValueError):
        return AuthVerdict.BAD_SIGNATURE
    return AuthVerdict.OK
