"""`talk show [NAME]`: the conversation with a contact, both ways, as a person reads it.

Kept free of typer, as `talk.mail` is, so the fast lane can run it: rich is imported only when
stdout is a terminal, and nothing here talks to the relay or needs the private keys. The lines
come from `follower.history.transcript`, their order and unread marks from `follower.history.timeline`, their
columns from `talk.columns`; this module picks the output and moves the read marks.

Read marks move only when a person saw the lines: on a terminal, unless --peek or --json.
A script (stdout not a terminal) reads without marking, and marks with --mark-read.
"""

from __future__ import annotations

import sys
import time
from typing import TYPE_CHECKING, Protocol

from durable.errors import UserError
from talk.columns import HEADER, STYLES, as_json, cells, plain_row, who_width
from talk.command_specs import SHOWN
from talk.context import identity_record
from talk.output import emit_json, result

if TYPE_CHECKING:
    from follower.history.readmarks import ReadMarks
    from follower.history.timeline import Line
    from follower.history.transcript import Transcript

POLL_S = 0.25


class Output(Protocol):
    def lines(self, lines: list[Line]) -> None: ...


class PlainOutput:
    """Aligned columns, no escape codes: for pipes, files and scripts that read text."""

    def __init__(self, who_cols: int, full: bool) -> None:
        self.who_cols, self.full = who_cols, full

    def lines(self, lines: list[Line]) -> None:
        text = "".join(plain_row(cells(line, self.full), self.who_cols) + "\n" for line in lines)
        sys.stdout.write(text)
        sys.stdout.flush()


class JsonOutput:
    """A list of objects; when following, one object per line (NDJSON), as they come."""

    def __init__(self, stream: bool) -> None:
        self.stream = stream

    def lines(self, lines: list[Line]) -> None:
        if not self.stream:
            emit_json([as_json(line) for line in lines])
            return
        for line in lines:
            emit_json(as_json(line))


class RichOutput:
    """A table in colour on a terminal; the text column fits its width. Each batch a follow
    prints is a table of the same column widths, without the header, so the columns line up."""

    def __init__(self, who_cols: int, full: bool) -> None:
        from rich.console import Console

        self.console = Console(highlight=False, emoji=False, markup=False)
        self.who_cols, self.full, self.header = who_cols, full, True

    def lines(self, lines: list[Line]) -> None:
        from rich.table import Table
        from rich.text import Text

        table = Table(box=None, show_header=self.header, header_style="bold", pad_edge=False,
                      expand=True)
        for title, width in zip(HEADER, (19, 12, self.who_cols, 9, None), strict=True):
            table.add_column(title, width=width, no_wrap=width is not None or not self.full,
                             overflow="fold" if self.full else "ellipsis", ratio=None if width else 1)
        self.header = False
        for line in lines:
            c = cells(line, self.full)
            text = Text.assemble((f"[{c.note}] " if c.note else "", STYLES["note"]), c.text)
            state = Text(c.state, STYLES.get(c.state_style, ""))
            table.add_row(Text(c.time, STYLES["time"]), Text(c.short, STYLES["id"]),
                          Text(c.who, STYLES[c.direction]), state, text)
        self.console.print(table)


def show(name: str | None, peek: bool = False, unread: bool = False, mark_read: bool = False,
         full: bool = False, everything: bool = False, follow: bool = False, limit: int = SHOWN,
         user: str | None = None, as_json: bool = False) -> None:
    """The conversation with contact `name` (every contact, interleaved, when None)."""
    from follower.history.readmarks import ReadMarks
    from follower.history.timeline import marks_after, newest_arrivals, pick, raised
    from follower.history.transcript import Transcript
    from keys.contacts import ContactBook

    if limit < 0:
        raise UserError(f"--limit must be 0 (all) or more, not {limit}")
    folder = identity_record(user).folder
    contact_book = ContactBook(folder)
    contacts = contact_book.all()
    peer = None if name is None else contact_book.get(name)
    transcript = Transcript(folder, None if peer is None else peer.fingerprint,
                            {c.fingerprint: c.name for c in contacts}, everything)
    book = ReadMarks(folder)
    marks = book.all()
    lines = marks_after(transcript.read(), marks)
    if mark_read:
        _mark_read(book, newest_arrivals(lines), name, as_json)
        return
    on_terminal = sys.stdout.isatty() and not as_json
    shown = pick(lines, unread, limit)
    names = [*(c.name for c in contacts), *(line.name for line in shown)]  # a former contact's too
    out = _output(as_json, follow, on_terminal, who_width(names), full)
    seen = on_terminal and not peek  # a person saw them
    if shown or as_json:
        out.lines(shown)
    elif not follow:
        result({}, _nothing(name, unread), False)
    if seen:
        book.advance(newest_arrivals(shown))
    if follow:
        _follow(transcript, out, raised(marks, newest_arrivals(shown)) if seen else marks,
                book if seen else None, unread)


def _output(as_json: bool, follow: bool, on_terminal: bool, who_cols: int, full: bool) -> Output:
    if as_json:
        return JsonOutput(stream=follow)
    return RichOutput(who_cols, full) if on_terminal else PlainOutput(who_cols, full)


def _nothing(name: str | None, unread: bool) -> str:
    with_whom = f" with {name}" if name else ""
    return f"no unread messages{with_whom}" if unread else f"no messages{with_whom} yet"


def _mark_read(book: ReadMarks, newest: dict[str, float], name: str | None, as_json: bool) -> None:
    moved = book.advance(newest)
    whose = name or "every contact"
    result({"marked": moved}, f"marked {whose}'s messages read" if moved else f"nothing new from {whose}",
           as_json)


def _follow(transcript: Transcript, out: Output, marks: dict[str, float], book: ReadMarks | None,
            unread: bool) -> None:
    """Print what comes until Ctrl-C; with `book`, what is printed counts as read."""
    from follower.history.timeline import marks_after, newest_arrivals, raised

    try:
        while True:
            time.sleep(POLL_S)
            new = marks_after(transcript.changes(), marks)
            new = [line for line in new if line.unread] if unread else new
            if not new:
                continue
            out.lines(new)
            if book is not None:
                marks = raised(marks, newest_arrivals(new))
                book.advance(newest_arrivals(new))
    except KeyboardInterrupt:
        return
