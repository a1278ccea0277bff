"""`talk show`'s typer declaration; the command itself is `talk.show`, which the fast lane also runs."""

from __future__ import annotations

from typing import Annotated

import typer

from talk.command_specs import EVERYTHING, FOLLOW, FULL, LIMIT, MARK_READ, PEEK, SHOWN, UNREAD
from talk.options import Json, User, option


def show_command(
    name: Annotated[str | None, typer.Argument(
        help="Contact name (or fingerprint); omit for every contact, interleaved in one timeline.",
        metavar="NAME", show_default=False)] = None,
    peek: Annotated[bool, option(PEEK)] = False,
    unread: Annotated[bool, option(UNREAD)] = False,
    mark_read: Annotated[bool, option(MARK_READ)] = False,
    full: Annotated[bool, option(FULL)] = False,
    everything: Annotated[bool, option(EVERYTHING)] = False,
    follow: Annotated[bool, option(FOLLOW)] = False,
    limit: Annotated[int, option(LIMIT)] = SHOWN,
    user: User = None, as_json: Json = False,
) -> None:
    """The conversation with a contact, both ways, oldest first: received, held, sent, tasks.

    Each line: time, short id, from/to whom, state, text (its first line; --full: all of it).

    Sent mail's state: sent, stored, held, spooled, written, delivered, refused, expired, dropped.

    Received mail is "new" until a person sees it: on a terminal, showing marks it read.

    --peek shows without marking; scripts (not a terminal, or --json) mark with --mark-read.

    States are as the outbox knows them; a follower keeps them current (or run `talk outbox`).

    --json prints a list of objects; with --follow, one object per line.

    Reads files only: no relay, no keys, no cursor an agent reads with.
    """
    from talk.show import show

    show(name, peek=peek, unread=unread, mark_read=mark_read, full=full, everything=everything,
         follow=follow, limit=limit, user=user, as_json=as_json)
