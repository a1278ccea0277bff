"""The sender's own brake: at most N messages a minute to one contact.

An agent stuck in a loop should hit this before its peer's receive limit does. The times of
the last minute's sends live in `sendrate.json`, under the identity folder's lock.
"""

from __future__ import annotations

import math
from pathlib import Path

from durable.errors import UserError
from durable.files import read_json, write_json
from durable.locks import folder_locked
from keys.contacts import Contact

SENDRATE_FILE = "sendrate.json"


def spend(folder: Path, contact: Contact, per_min: int, now: float) -> None:
    """Count one send to `contact`, or refuse it (nothing is sent) when the minute is full."""
    spend_each(folder, [(contact, per_min)], now)


def spend_each(folder: Path, limits: list[tuple[Contact, int]], now: float) -> None:
    """Count one send to each contact (with its limit a minute) in one write, as a group message
    does; or refuse them all, counting none, when any one's minute is full.

    Raises:
        UserError: naming the first contact whose minute is full and the wait.
    """
    path = folder / SENDRATE_FILE
    with folder_locked(folder):
        raw = read_json(path, {})
        for contact, per_min in limits:
            times = [t for t in raw.get(contact.fingerprint, [])
                     if isinstance(t, int | float) and now - t < 60]
            if len(times) >= per_min:
                wait = math.ceil(60 - (now - min(times)))
                raise UserError(
                    f"not sent: {per_min} messages to {contact.name} in the last minute is the limit; "
                    f"retry in {wait} s, or raise it with `talk policy {contact.name} --send-rate N`"
                )
            raw[contact.fingerprint] = [*times, now]
        write_json(path, raw)
