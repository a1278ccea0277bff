"""Peer text made safe to show: to a terminal, and to an agent inside talk's frame.

A peer's bytes may hold anything. Shown raw, ESC sequences drive a terminal, CR overwrites a
line, and the characters that end a line under some rule (VT, FF, the file separators, NEL,
U+2028, U+2029) or reorder it (bidi overrides) let text seem to start a line of its own, or to
say what it does not. Invisible characters do the same more quietly: Unicode's format
characters (Cf) and default-ignorable ones (tags U+E0000-E0FFF, variation selectors, fillers,
the soft hyphen) show nothing to a person, yet a model reads them, so "LGTM, merging." on screen
can carry an instruction to the agent. `printable` writes every such character as a visible
escape (\\x1b, \\u2028, \\U000e0041); `quote` quotes text line by line, where only "\\n" (or
"\\r\\n") starts a new quoted line.

Two characters stay where they do their visible work: U+200D (zero-width joiner) joins emoji
and changes no order; U+FE0E and U+FE0F, one directly after a visible character, choose its
text or emoji look (the ⚠️ of many an agent's reply). A selector anywhere else, a run of them,
or any of the other 254 carries hidden data, and is escaped.
"""

from __future__ import annotations

import functools
import re

__all__ = ["is_printable", "json_safe", "printable", "quote"]

# (first, last) code points written as escapes: Unicode's Cc (C0, DEL, C1), Zl and Zp, lone
# surrogates (not text: a terminal cannot encode them), then the Cf and Default_Ignorable_Code_Point
# sets (Unicode 15) and U+2800 (the blank braille pattern, a visible nothing), all but U+200D,
# U+FE0E and U+FE0F (see above). tests/unit/durable/test_printable.py checks this against the
# running Python's Unicode data.
_RANGES = (
    (0x00, 0x1F), (0x7F, 0x9F), (0xAD, 0xAD), (0x34F, 0x34F), (0x600, 0x605), (0x61C, 0x61C),
    (0x6DD, 0x6DD), (0x70F, 0x70F), (0x890, 0x891), (0x8E2, 0x8E2), (0x115F, 0x1160),
    (0x17B4, 0x17B5), (0x180B, 0x180F), (0x200B, 0x200C), (0x200E, 0x200F), (0x2028, 0x202E),
    (0x2060, 0x206F), (0x2800, 0x2800), (0x3164, 0x3164), (0xD800, 0xDFFF), (0xFE00, 0xFE0D),
    (0xFEFF, 0xFEFF), (0xFFA0, 0xFFA0), (0xFFF0, 0xFFFB), (0x110BD, 0x110BD), (0x110CD, 0x110CD),
    (0x13430, 0x1343F), (0x1BCA0, 0x1BCA3), (0x1D173, 0x1D17A), (0xE0000, 0xE0FFF),
)
_PRESENTATION = "\ufe0e\ufe0f"


def _char(code: int) -> str:
    return f"\\U{code:08x}"


def _class(ranges: tuple[tuple[int, int], ...], extra: str = "") -> str:
    return "[" + "".join(_char(a) + ("-" + _char(b) if b > a else "") for a, b in ranges) + extra + "]"


def _pattern(ranges: tuple[tuple[int, int], ...]) -> re.Pattern[str]:
    # A presentation selector is escaped at the start, or after anything escaped or a selector.
    after = _class(_RANGES, "\n\t" + _PRESENTATION)
    return re.compile(f"{_class(ranges)}|(?:^|(?<={after}))[{_PRESENTATION}]")


# Compiled classes of ranges (a class of thousands of single characters would cost
# milliseconds to compile). `_suspect` is the fast path: a text with none of its characters is
# clean after one pass in C, as fast as the BMP-only class before it; the look-behind runs only
# for a text that has one. It takes every astral character (and surrogate) as one range: a class
# holding the astral ranges one by one is searched four times slower. Compiled on first need
# (a millisecond): an ASCII text needs neither (see `is_printable`).
_BMP = tuple(r for r in _RANGES if r[1] < 0xD800 or 0xE000 <= r[0] < 0x10000)


@functools.cache
def _suspect() -> re.Pattern[str]:
    return re.compile(_class(_BMP, _PRESENTATION + _char(0xD800) + "-" + _char(0x10FFFF)))


@functools.cache
def _unsafe(lines: bool = False) -> re.Pattern[str]:
    """The exact set, compiled on first need: most texts never need it. With `lines`, "\t" and
    "\n" stay."""
    return _pattern(((0x00, 0x08), (0x0B, 0x1F), *_RANGES[1:]) if lines else _RANGES)


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def printable(text: str, *, lines: bool = False) -> str:
    """`text` with control, line-breaking, bidi and invisible characters written as escapes
    (\\x1b, \\u2028, \\U000e0041). With `lines`, "\\n" and tab stay; "\\r\\n" becomes "\\n" (a CR
    alone is escaped)."""
    if is_printable(text):
        return text
    if lines:
        return _unsafe(lines=True).sub(_escape, text.replace("\r\n", "\n"))
    return _unsafe().sub(_escape, text)


def is_printable(text: str) -> bool:
    """Whether `text` is one line that `printable` would leave as it is."""
    if text.isascii():  # the ASCII escapes are C0 and DEL: what str.isprintable refuses there
        return text.isprintable()
    return _suspect().search(text) is None or _unsafe().search(text) is None


def _json_escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    if code < 0x10000:
        return f"\\u{code:04x}"
    high, low = divmod(code - 0x10000, 0x400)  # JSON writes an astral character as a surrogate pair
    return f"\\u{0xD800 + high:04x}\\u{0xDC00 + low:04x}"


def json_safe(encoded: str) -> str:
    """JSON text (from json.dumps) with what it leaves raw inside strings (DEL, C1 controls,
    U+2028, bidi controls, invisible characters) written as \\u escapes: the same value,
    harmless on a terminal."""
    return encoded if is_printable(encoded) else _unsafe().sub(_json_escape, encoded)


def quote(text: str, prefix: str = "> ") -> str:
    """Every line of `text` behind `prefix`: no peer character can start a line of its own."""
    return "\n".join(prefix + line for line in printable(text, lines=True).split("\n"))
