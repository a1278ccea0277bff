"""HTTP errors the relay answers with: always JSON `{"error": CODE, "message": TEXT}`.

    ApiError(status, code, message)
    ├── 400 bad_request       malformed JSON, wrong types, bad fingerprints or tags
    ├── 401 unauthorized      missing, stale or replayed owner signature
    ├── 403 forbidden         a signature that is not the mailbox owner's
    ├── 404 not_found         unknown route, keys or invite; no ratchet key left to claim
    ├── 404 unknown_mailbox   no keys published for the mailbox a deposit or owner request names
                              (an owner's client publishes them again and retries)
    ├── 408 timeout           a request head or body slower than the relay waits for
    ├── 409 invite_used       an invite code that was already redeemed
    ├── 410 invite_expired    an invite past its expiry
    ├── 413 too_large         a body over the blob limit
    ├── 429 rate_limited      too many requests of one kind from one client, or deposits into
    │                         one tag; see Retry-After
    ├── 429 too_many_streams  the mailbox already has the most push streams a relay allows
    ├── 431 headers_too_large a request head over the byte or header-count limit
    ├── 507 mailbox_full      the quota the deposit counts against (the owner's channels, one
    │                         channel's share of them, or channels it never read) is full;
    │                         retry later
    ├── 507 keys_full         a publication would leave more one-time ratchet keys waiting than
    │                         the relay keeps for one identity
    ├── 500 internal          a bug; never for bad input
    ├── 503 busy              the process is at its connection cap
    └── 503 store_unavailable the store does not answer (any route); see Retry-After

408, 431, 503 busy and a malformed request's 400 are answered by `relay.http_limits`, before
the app sees the request.
"""

from __future__ import annotations


class ApiError(Exception):
    def __init__(
        self, status: int, code: str, message: str, headers: dict[str, str] | None = None
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.headers = headers or {}


def bad_request(message: str) -> ApiError:
    return ApiError(400, "bad_request", message)


def not_found(message: str) -> ApiError:
    return ApiError(404, "not_found", message)


def unknown_mailbox(message: str) -> ApiError:
    return ApiError(404, "unknown_mailbox", f"unknown mailbox: {message}")
