"""Peer text made safe to show: to a terminal, and to an agent inside talk's frame.

A peer's bytes may hold anything. Shown raw, ESC sequences drive a terminal, CR overwrites a
line, and the characters that end a line under some rule (VT, FF, the file separators, NEL,
U+2028, U+2029) or reorder it (bidi overrides) let text seem to start a line of its own, or to
say what it does not. `printable` writes every such character as a visible escape; `quote`
quotes text line by line, where only "\\n" (or "\\r\\n") starts a new quoted line.
"""

from __future__ import annotations

import re

__all__ = ["is_printable", "json_safe", "printable", "quote"]

# Invisible or reordering characters outside Cc/Zl/Zp: bidi embeddings, overrides and isolates,
# marks, zero-width spaces and word joiners, and the BOM. U+200D (zero-width joiner) stays: it
# joins emoji and changes no order.
_INVISIBLE = (0x061C, 0x180E, 0x200B, 0x200C, 0x200E, 0x200F, *range(0x202A, 0x202F),
              *range(0x2060, 0x2065), *range(0x2066, 0x206A), 0xFEFF)


def _escape(code: int) -> str:
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def _table() -> dict[int, str]:
    # Unicode's Cc (C0, DEL, C1), Zl (U+2028) and Zp (U+2029), then the invisible ones.
    codes = [*range(0x20), *range(0x7F, 0xA0), 0x2028, 0x2029, *_INVISIBLE]
    return {c: _escape(c) for c in codes}


_ONE_LINE = _table()
_MULTI_LINE = {c: e for c, e in _ONE_LINE.items() if c not in (0x09, 0x0A)}
# The same set as ranges: a class of a hundred single characters costs milliseconds to compile.
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u180e\u200b\u200c\u200e\u200f\u2028-\u202e"
                     "\u2060-\u2064\u2066-\u2069\ufeff]")


def printable(text: str, *, lines: bool = False) -> str:
    """`text` with control, line-breaking and bidi characters written as escapes (\\x1b, \\u2028).
    With `lines`, "\\n" and tab stay; "\\r\\n" becomes "\\n" (a CR alone is escaped)."""
    if _UNSAFE.search(text) is None:
        return text
    if lines:
        return text.replace("\r\n", "\n").translate(_MULTI_LINE)
    return text.translate(_ONE_LINE)


def is_printable(text: str) -> bool:
    """Whether `text` is one line that `printable` would leave as it is."""
    return _UNSAFE.search(text) is None


_JSON = {c: f"\\u{c:04x}" for c in _ONE_LINE}


def json_safe(encoded: str) -> str:
    """JSON text (from json.dumps) with what it leaves raw inside strings (DEL, C1 controls,
    U+2028, bidi controls) written as \\u escapes: the same value, harmless on a terminal."""
    return encoded if _UNSAFE.search(encoded) is None else encoded.translate(_JSON)


def quote(text: str, prefix: str = "> ") -> str:
    """Every line of `text` behind `prefix`: no peer character can start a line of its own."""
    return "\n".join(prefix + line for line in printable(text, lines=True).split("\n"))
