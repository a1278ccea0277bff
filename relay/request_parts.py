"""The parts of a request every relay route reads the same way: path ids, a bounded body, JSON.

Each refuses what it cannot use with an `ApiError` (400 or 413), before any store call. A body
trickled in too slowly is the HTTP layer's to end (`relay.http_limits`: 408, then closed); the
route then reads a client gone mid-body.
"""

from __future__ import annotations

from typing import Any

from starlette.requests import ClientDisconnect, HTTPConnection, Request

from durable.bounded_json import parse_json
from keys.encoding import is_hex32
from relay.errors import ApiError, bad_request

__all__ = ["json_object", "path_hex", "read_body"]


def path_hex(conn: HTTPConnection, name: str) -> str:
    value = conn.path_params[name]
    if not is_hex32(value):
        raise bad_request(f"{name} must be 32 lowercase hex characters")
    return str(value)


async def read_body(request: Request, limit: int) -> bytes:
    """Read at most `limit` bytes; a larger body is refused before it is all read."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise ApiError(413, "too_large", f"body of {declared} bytes exceeds the limit of {limit}")
    chunks, size = [], 0
    try:
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise ApiError(413, "too_large", f"body exceeds the limit of {limit} bytes")
            chunks.append(chunk)
    except ClientDisconnect:  # a client gone mid-body (too slow, or a malformed chunk) is no relay fault
        raise bad_request("the body ended early: the client went away or sent a malformed chunk") from None
    return b"".join(chunks)


def json_object(body: bytes) -> dict[str, Any]:
    try:
        data = parse_json(body, len(body))  # the size is `read_body`'s to limit, per route
    except ValueError as exc:
        raise bad_request(f"body is not valid JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise bad_request("body must be a JSON object")
    return data
