"""relay.errors: every refusal carries its status, its stable code and a message for a person."""

from __future__ import annotations

from relay.errors import ApiError, bad_request, not_found, unknown_mailbox


def test_the_helpers_give_the_documented_status_and_code() -> None:
    shapes = [(e.status, e.code, e.message) for e in (
        bad_request("'tags' must be a list"), not_found("no such key"), unknown_mailbox("never published"),
    )]
    assert shapes == [(400, "bad_request", "'tags' must be a list"), (404, "not_found", "no such key"),
                      (404, "unknown_mailbox", "unknown mailbox: never published")]


def test_an_api_error_is_an_exception_whose_text_is_its_message_and_headers_default_empty() -> None:
    plain = ApiError(429, "rate_limited", "too many deposits")
    assert str(plain) == "too many deposits" and plain.headers == {}
    timed = ApiError(503, "store_unavailable", "try again", {"Retry-After": "2"})
    assert timed.headers == {"Retry-After": "2"}
    assert ApiError(400, "a", "b").headers is not ApiError(400, "a", "b").headers  # never shared
