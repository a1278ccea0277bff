"""The opencode-mesh v1 text protocol: reading message text as tasks and blocks, and writing them.

A task envelope starts with a `[opencode-mesh v1]` line, then `key: value` headers, a `---` line
and the task body. Result, question and digest blocks sit between `[opencode-mesh-<kind> v1]` and
`[/opencode-mesh-<kind>]` lines, anywhere in a longer reply. The legacy name `aoi-mesh` is accepted
in every tag when parsing (open and close tags may mix); builders write only `opencode-mesh`.

`parse` never raises: text that is not a well-formed envelope or block is "chat". If a text holds
more than one block, the first valid one (by position) wins; a task envelope is recognised only
when its marker is the first non-empty line. Keys inside blocks start at column 0, which is why a
multi-line summary is written with its continuation lines indented by two spaces.

Every task id must be of the shape `durable.mesh_fields.TASK_ID` and every task header value
printable on one line, else the text is chat: these values are shown to agents outside the quote.

Trust: parsing says nothing about trust. Whether a message framed as a task is treated as one is
decided elsewhere, by the sender's policy; anyone can type these markers.
"""

from __future__ import annotations

import math
import re
import secrets
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from durable.mesh_fields import MARKERS, MODES, STATUSES, is_task_id
from keys import gate

__all__ = ["Parsed", "new_task_id", "parse", "result_block", "task_envelope"]

_MARK = "|".join(re.escape(marker) for marker in MARKERS)
_TASK_TAG = re.compile(rf"\[(?:{_MARK}) v1\]")
_OPEN_TAG = re.compile(rf"\[(?:{_MARK})-(result|question|digest) v1\]")
_CLOSE_TAG = re.compile(rf"\[/(?:{_MARK})-(result|question|digest)\]")
_KEY_LINE = re.compile(r"([A-Za-z][A-Za-z0-9_-]*):(.*)")
_GEN = re.compile(r"[0-9]{1,18}")  # bounded: int() refuses very long digit strings
_RAND = re.compile(r"[0-9a-z]{4}")
_BASE36 = "0123456789abcdefghijklmnopqrstuvwxyz"
_BLOCK_KEYS = {
    "result": ("task", "status", "summary", "artifacts"),
    "question": ("task", "question", "options"),
    "digest": ("task", "gen", "facts", "pending", "refs"),
}
# The task headers that keep their own name on the spool line; any other header is stored as
# "mesh_<name>", so an envelope can never set a field the receiver's own judgement sets
# (task_trust, retry, gap, hops, …), today's or tomorrow's.
_TASK_HEADERS = frozenset({"task", "mode", "reply", "env"})

Values = dict[str, list[str]]  # block key -> [value on the key's line, following lines...]


@dataclass(frozen=True)
class Parsed:
    """One message read as protocol: its kind, the fields for its spool line, and its body."""

    kind: str  # "task" | "result" | "question" | "digest" | "chat"
    fields: dict[str, Any]
    body: str  # a task's text after the "---" line; the original text for the other kinds


def parse(text: str) -> Parsed:
    """Read `text` as a task envelope or the first valid block in it; anything else is chat."""
    lines = _split_lines(text)
    task = _parse_task(lines)
    if task is not None:
        return task
    for start, line in enumerate(lines):
        opening = _OPEN_TAG.fullmatch(line.strip())
        block = _parse_block(opening.group(1), lines, start, text) if opening else None
        if block is not None:
            return block
    return Parsed("chat", {}, text)


def _split_lines(text: str) -> list[str]:
    # Split on "\n" only (not str.splitlines) so form feeds or U+2028 inside a value stay put.
    return [line[:-1] if line.endswith("\r") else line for line in text.split("\n")]


def _strip_blank_lines(lines: list[str]) -> str:
    filled = [index for index, line in enumerate(lines) if line.strip()]
    return "\n".join(lines[filled[0] : filled[-1] + 1]) if filled else ""


def _parse_task(lines: list[str]) -> Parsed | None:
    start = next((i for i, line in enumerate(lines) if line.strip()), None)
    if start is None or not _TASK_TAG.fullmatch(lines[start].strip()):
        return None
    header: dict[str, Any] = {}
    for index in range(start + 1, len(lines)):
        line = lines[index].strip()
        if line == "---":
            header.setdefault("mode", "one-shot")
            valid = is_task_id(header.get("task")) and header["mode"] in MODES
            return Parsed("task", header, _strip_blank_lines(lines[index + 1 :])) if valid else None
        if not line:
            continue
        match = _KEY_LINE.fullmatch(line)
        if match is None:
            return None
        key = match.group(1).lower()
        name = key if key in _TASK_HEADERS else f"mesh_{key}"
        if name in header:
            return None  # two values for one header: no way to tell which one the sender meant
        value = gate.check_header_value(match.group(2).strip())
        if value is None:
            return None  # a header value that could not be shown safely: not a task
        header[name] = value
    return None  # no "---" line


def _parse_block(kind: str, lines: list[str], start: int, text: str) -> Parsed | None:
    end = _find_close(kind, lines, start)
    if end is None:
        return None
    values = _read_keys(_BLOCK_KEYS[kind], lines[start + 1 : end])
    fields = None if values is None else _READERS[kind](values)
    return None if fields is None else Parsed(kind, fields, text)


def _find_close(kind: str, lines: list[str], start: int) -> int | None:
    for index in range(start + 1, len(lines)):
        line = lines[index].strip()
        if _OPEN_TAG.fullmatch(line):
            return None  # this block was left open; the next opening tag gets its own try
        closing = _CLOSE_TAG.fullmatch(line)
        if closing:
            return index if closing.group(1) == kind else None
    return None


def _read_keys(keys: tuple[str, ...], body: list[str]) -> Values | None:
    values: Values = {}
    current: list[str] | None = None
    for line in body:
        match = _KEY_LINE.fullmatch(line)
        key = match.group(1).lower() if match else ""
        if match and key in keys:
            if key in values:
                return None
            current = values[key] = [match.group(2).strip()]
        elif current is not None:
            current.append(line)  # lines until the next known key belong to the current one
    return values


def _first(values: Values, key: str) -> str:
    return values.get(key, [""])[0]


def _text(parts: list[str]) -> str:
    # Continuation lines were indented by two spaces so they cannot be read as keys: undo that.
    rest = [line[2:] if line.startswith("  ") else line for line in parts[1:]]
    return "\n".join(parts[:1] + rest).strip()


def _comma_list(value: str) -> list[str]:
    if value.strip().lower() in ("", "none"):
        return []
    return [item.strip() for item in value.split(",") if item.strip()]


def _result_fields(values: Values) -> dict[str, Any] | None:
    task, status = _first(values, "task"), _first(values, "status")
    if not is_task_id(task) or status not in STATUSES:
        return None
    summary = _text(values.get("summary", []))
    return {"task": task, "status": status, "summary": summary,
            "artifacts": _comma_list(_first(values, "artifacts"))}


def _question_fields(values: Values) -> dict[str, Any] | None:
    task, question = _first(values, "task"), _first(values, "question")
    if not is_task_id(task) or not question:
        return None
    options = [option.strip() for option in _first(values, "options").split("|") if option.strip()]
    return {"task": task, "question": question, "options": options}


def _digest_fields(values: Values) -> dict[str, Any] | None:
    # The protocol drops a non-conforming digest (rotation is skipped), so every key is required.
    task, gen = _first(values, "task"), _first(values, "gen")
    complete = all(k in values for k in _BLOCK_KEYS["digest"])
    if not is_task_id(task) or not _GEN.fullmatch(gen) or not complete:
        return None
    facts = _facts(values["facts"])
    if facts is None:
        return None
    pending = _text(values["pending"])
    return {"task": task, "gen": int(gen), "facts": facts,
            "pending": None if pending.lower() in ("", "none") else pending,
            "refs": _comma_list(_first(values, "refs"))}


def _facts(parts: list[str]) -> list[str] | None:
    if parts[0]:
        return None  # facts come one per "- " line below "facts:", never on its own line
    facts = []
    for line in parts[1:]:
        item = line.strip()
        if item and not item.startswith("-"):
            return None
        if item[1:].strip():
            facts.append(item[1:].strip())
    return facts


_READERS: dict[str, Callable[[Values], dict[str, Any] | None]] = {
    "result": _result_fields, "question": _question_fields, "digest": _digest_fields,
}


def new_task_id(node: str, now: float | None = None, rand: str | None = None) -> str:
    """`<node>-<base36 seconds>-<4 random base36 chars>`, the suggested form; `rand` fixes the suffix."""
    clean = re.sub(r"[^a-z0-9_-]", "-", node.lower()) or "node"
    stamp = time.time() if now is None else now
    if not math.isfinite(stamp) or stamp < 0:
        raise ValueError("now must be a finite, non-negative time in seconds")
    suffix = "".join(secrets.choice(_BASE36) for _ in range(4)) if rand is None else rand
    if not _RAND.fullmatch(suffix):
        raise ValueError("rand must be 4 lowercase base36 characters")
    return f"{clean}-{_base36(int(stamp))}-{suffix}"


def _base36(number: int) -> str:
    digits = ""
    while True:
        number, digit = divmod(number, 36)
        digits = _BASE36[digit] + digits
        if number == 0:
            return digits


def task_envelope(
    sender: str, task_id: str, text: str, mode: str = "one-shot", env: str | None = None
) -> str:
    """A task envelope; `text` loses its surrounding blank lines, as parsing would drop them."""
    _check_line("sender", sender)
    _check_line("task id", task_id)
    if mode not in MODES:
        raise ValueError(f"mode must be one of {', '.join(MODES)}, not {mode!r}")
    lines = [f"[{MARKERS[0]} v1]", f"from: {sender}", f"task: {task_id}", f"mode: {mode}",
             "reply: result-block"]
    if env is not None:
        _check_line("env", env)
        lines.append(f"env: {env}")
    body = _strip_blank_lines(_split_lines(_normalize(text)))
    _reject_tags("text", body, (_CLOSE_TAG,))
    return "\n".join([*lines, "---", body])


def result_block(task_id: str, status: str, summary: str, artifacts: list[str] | None = None) -> str:
    """A result block; the summary is trimmed and its later lines indented by two spaces."""
    _check_line("task id", task_id)
    if status not in STATUSES:
        raise ValueError(f"status must be one of {', '.join(STATUSES)}, not {status!r}")
    paths = artifacts or []
    for path in paths:
        _check_line("artifact path", path, ",")
        if path.lower() == "none":
            raise ValueError('an artifact path cannot be "none": that spells an empty list')
    text = "\n".join(line.rstrip() for line in _normalize(summary).split("\n")).strip()
    _reject_tags("summary", text, (_OPEN_TAG, _CLOSE_TAG))
    first, *rest = text.split("\n")
    tag = f"{MARKERS[0]}-result"
    lines = [f"[{tag} v1]", f"task: {task_id}", f"status: {status}", f"summary: {first}".rstrip()]
    lines += [f"  {line}" for line in rest]  # indented: a summary line can never pass for a key
    lines += [f"artifacts: {', '.join(paths) or 'none'}", f"[/{tag}]"]
    return "\n".join(lines)


def question_block(task_id: str, question: str, options: list[str] | None = None) -> str:
    """A question block: one single-line question and optional choices."""
    _check_line("task id", task_id)
    _check_line("question", question)
    for option in options or []:
        _check_line("option", option, "|")
    choices = " | ".join(options or [])
    tag = f"{MARKERS[0]}-question"
    lines = [f"[{tag} v1]", f"task: {task_id}", f"question: {question}"]
    lines += [f"options: {choices}" if choices else "options:", f"[/{tag}]"]
    return "\n".join(lines)


def _normalize(text: str) -> str:
    return text.replace("\r\n", "\n").replace("\r", "\n")


def _check_line(name: str, value: str, separator: str = "") -> None:
    # Surrounding blanks would be stripped by the parser, so they could not survive a round trip.
    if not value or "\n" in value or "\r" in value or value != value.strip():
        raise ValueError(f"{name} must be a non-empty single line without surrounding blanks")
    if separator and separator in value:
        raise ValueError(f"{name} {value!r} cannot contain {separator!r}: it separates the list")


def _reject_tags(name: str, text: str, tags: Iterable[re.Pattern[str]]) -> None:
    for line in text.split("\n"):
        if any(tag.fullmatch(line.strip()) for tag in tags):
            raise ValueError(f"{name} cannot contain a protocol tag line: {line.strip()!r}")
