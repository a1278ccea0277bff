"""HTTP errors the relay answers with: always JSON `{"error": CODE, "message": TEXT}`.

    ApiError(status, code, message)
    ├── 400 bad_request       malformed JSON, wrong types, bad fingerprints or tags
    ├── 401 unauthorized      missing, stale or replayed owner signature
    ├── 403 forbidden         a signature that is not the mailbox owner's
    ├── 404 not_found         unknown route, mailbox, keys or invite
    ├── 409 invite_used       an invite code that was already redeemed
    ├── 410 invite_expired    an invite past its expiry
    ├── 413 too_large         a body over the blob limit
    ├── 507 mailbox_full      the recipient's mailbox is at its cap; retry later
    └── 500 internal          a bug; never for bad input
"""

from __future__ import annotations


class ApiError(Exception):
    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message


def bad_request(message: str) -> ApiError:
    return ApiError(400, "bad_request", message)


def not_found(message: str) -> ApiError:
    return ApiError(404, "not_found", message)
