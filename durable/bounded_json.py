"""JSON from outside this machine, parsed within limits: the one way talk reads a peer's bytes.

Whatever a contact, a joiner, a group member or a relay sends is parsed here, never by a bare
`json.loads`: the bytes must be UTF-8, at most `max_bytes` long, nested at most `max_depth` deep,
and every string in them text (JSON may escape half a UTF-16 pair, "\\ud800", which no file or
terminal can take: written later, it would fail there instead), or `parse_json` raises
`JSONRefused` (a ValueError, as the standard parser's own errors are, so a caller catches one
family).

Depth is the limit that matters. The standard parser recurses once per level, so a few kilobytes
of "[[[[…" raise RecursionError (not a ValueError: it escaped every handler that expected one)
and, nested a little less deep, build values that make any later recursive walk fail the same
way. The depth is checked before parsing, without recursion: a text with no more '[' and '{'
than `max_depth` cannot be deeper (one C-speed count, the common case: talk's envelopes hold a
handful); only a text with more brackets than that is walked, its strings skipped by one regex,
its brackets counted in a loop that stops at the first level too deep.
"""

from __future__ import annotations

import json
import re
from typing import Any

__all__ = ["MAX_DEPTH", "JSONRefused", "parse_json"]

MAX_DEPTH = 32  # talk's deepest message (a receipt's items, an Olm card) nests 3 levels
# What decides the depth: a whole JSON string (brackets inside it are text), the quote of a string
# never closed, a bracket. The search skips everything else at C speed.
_TOKEN = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|["\[\]{}]', re.DOTALL)
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")  # half of a pair, or a whole one: looked at closer


class JSONRefused(ValueError):
    """Bytes that are not JSON within the limits; `str()` says which limit or why."""


def parse_json(raw: bytes | str, max_bytes: int, max_depth: int = MAX_DEPTH) -> Any:
    """The JSON value `raw` holds.

    Raises:
        JSONRefused: longer than `max_bytes`, not UTF-8, nested deeper than `max_depth`, not JSON,
            or holding half of a UTF-16 pair.
    """
    if len(raw) > max_bytes:
        raise JSONRefused(f"JSON of {len(raw):,} bytes, over the limit of {max_bytes:,}")
    try:
        text = raw.decode() if isinstance(raw, bytes) else raw
    except UnicodeDecodeError as exc:
        raise JSONRefused(f"JSON that is not UTF-8 ({exc.reason} at byte {exc.start})") from None
    if text.count("[") + text.count("{") > max_depth and depth_over(text, max_depth):
        raise JSONRefused(f"JSON nested deeper than {max_depth} levels")
    try:
        value = json.loads(text)
    except RecursionError:  # not reached within the depth limit; kept so no input escapes as one
        raise JSONRefused("JSON nested too deep to parse") from None
    except ValueError as exc:
        raise JSONRefused(f"not JSON ({exc})") from None
    if _SURROGATE_ESCAPE.search(text) is not None and not _all_text(value):
        raise JSONRefused("JSON holding half of a UTF-16 pair (a lone \\ud800 escape): not text")
    return value


def _all_text(value: Any) -> bool:
    """Whether every string in `value` (no deeper than the limit: checked) encodes as UTF-8."""
    try:
        json.dumps(value, ensure_ascii=False).encode()
    except UnicodeEncodeError:
        return False
    return True


def depth_over(text: str, max_depth: int) -> bool:
    """Whether any bracket of `text`, outside its strings, opens past level `max_depth`."""
    depth = 0
    for found in _TOKEN.finditer(text):
        token = found.group()
        if token in ("[", "{"):
            depth += 1
            if depth > max_depth:
                return True
        elif token in ("]", "}"):
            depth = max(depth - 1, 0)
        elif token == '"':
            # A string never closed: the parser stops there with its own error. Stopping here too
            # keeps the walk linear (each later quote would scan to the end again).
            return False
    return False
