"""HTTP errors the relay answers with: always JSON `{"error": CODE, "message": TEXT}`.

    ApiError(status, code, message)
    ├── 400 bad_request       malformed JSON, wrong types, bad fingerprints or tags
    ├── 401 unauthorized      missing, stale or replayed owner signature
    ├── 403 forbidden         a signature that is not the mailbox owner's
    ├── 404 not_found         unknown route, mailbox, keys or invite
    ├── 409 invite_used       an invite code that was already redeemed
    ├── 410 invite_expired    an invite past its expiry
    ├── 413 too_large         a body over the blob limit
    ├── 429 rate_limited      too many deposits from one client or into one tag; see Retry-After
    ├── 429 too_many_streams  the mailbox already has the most push streams a relay allows
    ├── 507 mailbox_full      the recipient's mailbox is at its cap; retry later
    ├── 500 internal          a bug; never for bad input
    └── 503 store_unavailable GET /healthz: the store does not answer
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
