"""Which role the model sees peer mail in, as the fake model recorded it, and what README's door
matrix says it should be.

`role_of` reads one recorded request: the role of the first message whose text holds the
needle ("system" for the top-level instructions; a tool's result counts as "tool", also where
Anthropic's API carries it inside a user message). `matrix_role` reads the "Model sees it as"
column of README's table of doors: each role is written in backticks, optionally followed by
the doors it is for in parentheses, e.g. "`developer` (SessionStart, PostToolUse): why;
`user` (Stop): why". A role without doors is the row's role for every door. The text up to
the next role says how the text arrives: byte for byte, unless it says "escaped as" and names
the entities (`&lt;`, `&gt;`, `&amp;`, `&quot;`). Rows other than the one asked for (more
hosts, more doors) are ignored, so the table may grow.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from durable.printable import quote
from tests.hosts import wire
from tests.hosts.fake_model import FakeModel, Request

__all__ = [
    "MAIL",
    "README",
    "arrives_as_claimed",
    "arrives_whole",
    "carrier",
    "matrix_role",
    "matrix_rows",
    "matrix_transform",
    "role_of",
    "seen_role",
]

README = Path(__file__).resolve().parents[2] / "README.md"
MATRIX_HEAD = "| Host, version |"
COLUMN = "Model sees it as"
ROLES = ("user", "tool", "developer", "system")
ELEVATED = ("developer", "system")
NOTE = "NOTE: your host can hand this over only as "  # alarms.framing.channel_note
_ROLE = re.compile(r"`(" + "|".join(ROLES) + r")`(?: \(([^)]*)\))?")

# Peer text with what a host might rewrite on the way: a quote mark of each kind, `>` at a
# line's start and inside, `&`, a tag, and characters outside ASCII.
MAIL = "say \"hi\" & 'bye' <b>bold</b> a>b\n> quoted & <i>tagged</i>\ncafé ✓ — naïve 日本"


def arrives_whole(request: Request, text: str = MAIL, escape: Callable[[str], str] | None = None) -> bool:
    """Some text of the request holds `text` quoted by talk's frame, byte for byte (or as
    `escape` rewrites the quoted text)."""
    quoted = quote(text) if escape is None else escape(quote(text))
    return any(quoted in t for t in request["texts"] + request["system_texts"])


# --- the role of a message in a recorded request ---------------------------------------------

def _anthropic(body: dict[str, Any]) -> list[tuple[str, list[str]]]:
    out = [("system", wire.strings(body.get("system")))]
    for message in body.get("messages") or []:
        if not isinstance(message, dict):
            continue
        role, content = str(message.get("role", "")), message.get("content")
        blocks = content if isinstance(content, list) else [content]
        for block in blocks:
            is_tool = isinstance(block, dict) and block.get("type") == "tool_result"
            out.append(("tool" if is_tool else role, wire.strings(block)))
    return out


def _openai(path: str, body: dict[str, Any]) -> list[tuple[str, list[str]]]:
    out = [("system", wire.strings(body.get("instructions")))]
    return out + [(role, wire.strings(content)) for role, content in wire._messages(path, body)]


def _gemini(body: dict[str, Any]) -> list[tuple[str, list[str]]]:
    system = body.get("systemInstruction") or body.get("system_instruction")
    texts = [system] if isinstance(system, str) else wire.strings(
        [p.get("text") for p in (system or {}).get("parts") or [] if isinstance(p, dict)])
    return [("system", texts), *wire.gemini_messages(body)]


def messages(request: Request) -> list[tuple[str, list[str]]]:
    """(role, texts) of every message of a recorded request, the system instructions first."""
    path, body = request["path"].split("?")[0], request["body"]
    if not isinstance(body, dict):
        return []
    if wire.gemini_action(path):
        return _gemini(body)
    return _anthropic(body) if path.endswith("/messages") else _openai(path, body)


def carrier(request: Request, needle: str) -> tuple[str, str] | None:
    """The role and text of the first message of `request` whose text holds `needle`."""
    return next(((role, t) for role, texts in messages(request) for t in texts if needle in t), None)


def role_of(request: Request, needle: str) -> str | None:
    """The role of the first message of `request` whose text holds `needle`; None if none does."""
    found = carrier(request, needle)
    return found[0] if found else None


def seen_role(model: FakeModel, needle: str) -> str | None:
    """The role `needle` had in the first request that carried it."""
    first = next((r for r in model.requests if role_of(r, needle)), None)
    return role_of(first, needle) if first else None


# --- the matrix in README ----------------------------------------------------------------------

def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def matrix_rows(readme: str | None = None) -> dict[str, str]:
    """First cell -> "Model sees it as" cell, for every row of the door matrix."""
    lines = (README.read_text() if readme is None else readme).splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(MATRIX_HEAD))
    column = _cells(lines[start]).index(COLUMN)
    rows: dict[str, str] = {}
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        cells = _cells(line)
        rows[cells[0]] = cells[column] if column < len(cells) else ""
    return rows


ENTITIES = {"&lt;": "<", "&gt;": ">", "&quot;": "\"", "&#39;": "'"}  # "&amp;" goes first, apart


def _entry(row: str, door: str, readme: str | None) -> tuple[str, str]:
    """The role the matrix gives `door` in the row whose first cell starts with `row`, and what
    it says of that role's channel."""
    (cell,) = [c for first, c in matrix_rows(readme).items() if first.startswith(row)]
    matches = list(_ROLE.finditer(cell))
    for match, after in zip(matches, [*matches[1:], None], strict=True):
        doors = [d.strip() for d in (match.group(2) or "").split(",") if d.strip()]
        if not doors or door in doors:
            return match.group(1), cell[match.end():after.start() if after else len(cell)]
    raise AssertionError(f"the matrix row {row!r} names no role for {door}: {cell!r}")


def matrix_role(row: str, door: str, readme: str | None = None) -> str:
    """The role the matrix gives `door` in the row whose first cell starts with `row`."""
    return _entry(row, door, readme)[0]


def matrix_transform(row: str, door: str, readme: str | None = None) -> Callable[[str], str] | None:
    """How the matrix says the host rewrites peer text on `door`: None for byte for byte, else
    the escaping it names (e.g. "escaped as `&lt;` `&gt;`")."""
    said = _entry(row, door, readme)[1]
    if "escaped as" not in said:
        return None
    named = said.split("escaped as", 1)[1]
    chars = {ENTITIES[e]: e for e in ENTITIES if e in named}
    amp = "&amp;" in named

    def escape(text: str) -> str:
        text = text.replace("&", "&amp;") if amp else text
        return "".join(chars.get(c, c) for c in text)
    return escape


def arrives_as_claimed(request: Request, needle: str, row: str, door: str, text: str = MAIL) -> None:
    """The request carries `needle` in the role the matrix gives `door`, and `text` whole: byte
    for byte, or as the matrix says the host rewrites it (and then not byte for byte)."""
    found = carrier(request, needle)
    assert found is not None and found[0] == matrix_role(row, door), (row, door, found and found[0])
    if found[0] in ELEVATED:
        assert NOTE in found[1], (row, door, "the frame does not name its elevated channel")
    escape = matrix_transform(row, door)
    if escape is None:
        assert arrives_whole(request, text), (row, door, "not byte for byte", text)
    else:
        assert not arrives_whole(request, text) and arrives_whole(request, text, escape), (row, door)
