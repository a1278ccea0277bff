"""Message ids as people type them: the whole 32-hex id, or an unambiguous prefix of it.

Lists show an id's first SHORT characters (`short`); every command that takes an id back
accepts any prefix of MIN_PREFIX characters or more that names one message (`resolve`). What
was typed is checked before it is looked up or echoed: it may come from anywhere.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from durable.errors import NotFound, UserError

__all__ = ["MIN_PREFIX", "SHORT", "resolve", "short"]

SHORT = 12  # what lists show: ample to be unique, short enough to copy
MIN_PREFIX = 6
ID_LEN = 32
_HEX = re.compile(r"[0-9a-f]+")


def short(msg_id: str) -> str:
    """The id as lists show it."""
    return msg_id[:SHORT]


def resolve(typed: str, ids: Iterable[str], what: str, hint: str) -> str:
    """The one id in `ids` that `typed` is, or begins.

    `what` names the kind of message ("sent message"), `hint` the command that lists them.

    Raises:
        UserError: `typed` is not 6 to 32 hex characters, or begins several ids.
        NotFound: no id begins with `typed`.
    """
    prefix = typed.strip().lower()
    if not (MIN_PREFIX <= len(prefix) <= ID_LEN and _HEX.fullmatch(prefix)):
        shown = typed if len(typed) <= 40 else typed[:40] + "…"
        raise UserError(f"{shown!r} is not a message id: give {MIN_PREFIX} to {ID_LEN} hex characters "
                        f"of one ({hint})")
    matches = sorted({i for i in ids if i.startswith(prefix)})
    if not matches:
        raise NotFound(f"no {what} {prefix}; {hint}")
    if len(matches) > 1:
        raise UserError(f"ambiguous: {prefix} matches {len(matches)} messages; give more characters "
                        f"({', '.join(short(m) for m in matches[:3])}{', …' if len(matches) > 3 else ''})")
    return matches[0]
