"""Byte and text encodings shared by both ends of the wire."""

from __future__ import annotations

import base64
import binascii
import json
import os
import re
from datetime import UTC, datetime
from typing import Any

__all__ = ["b64d", "b64e", "is_hex32", "iso_from_epoch", "token_hex", "utc_now_iso"]

HEX32 = re.compile(r"[0-9a-f]{32}")


def b64e(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def b64d(text: str, length: int | None = None) -> bytes:
    """Decode standard base64; raise ValueError on bad input or an unexpected length."""
    if not isinstance(text, str):
        raise ValueError("expected a base64 string")
    try:
        data = base64.b64decode(text.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError) as exc:
        raise ValueError("not valid base64") from exc
    if length is not None and len(data) != length:
        raise ValueError(f"expected {length} bytes, got {len(data)}")
    return data


def canonical_json(obj: Any) -> bytes:
    """One byte string per value: what signatures are computed over."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def is_hex32(value: object) -> bool:
    return isinstance(value, str) and HEX32.fullmatch(value) is not None


def token_hex(nbytes: int) -> str:
    """`nbytes` random bytes from the OS, in hex: what `secrets.token_hex` gives, without the
    imports of `secrets` (`random`, `hmac`), which every `talk send` and `talk receive` would pay."""
    return os.urandom(nbytes).hex()


def utc_now_iso() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def iso_from_epoch(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
