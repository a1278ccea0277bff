"""The sender's own brake: at most N messages a minute to one contact.

An agent stuck in a loop should hit this before its peer's receive limit does. The last
minute's sends live in `sendrate.state`, under the identity folder's lock, counted per whole
second: {fingerprint: {"<second>": count}}. So the file holds at most 61 numbers per contact
whatever the limit (up to 100000 a minute), and a send rewrites that much, never one entry per
message of the last minute. A second's sends leave the window together, up to a second early.

The file is rewritten in place (`durable.slots`), not replaced: a new file renamed over the old
one makes the file system flush it, on every send. Not synced: a count a power loss takes back
lets one more message through, no worse. An earlier version kept the counts whole in
`sendrate.json`: read once, then removed, so that version, run again, starts from nothing
rather than from what it left.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from durable.errors import UserError
from durable.files import read_json
from durable.locks import folder_locked
from durable.slots import read_slotted_json, write_slots
from keys.contacts import Contact

__all__ = ["spend", "spend_each"]

SENDRATE_FILE = "sendrate.state"
EARLIER_FILE = "sendrate.json"
WINDOW_S = 60


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
    second = int(now)
    with folder_locked(folder):
        raw, at = read_slotted_json(path, None)
        if at is None:
            raw = read_json(folder / EARLIER_FILE, {})
        counted = {fp: window(seconds, now) for fp, seconds in raw.items()} if isinstance(raw, dict) else {}
        for contact, per_min in limits:
            seconds = counted.get(contact.fingerprint, {})
            if sum(seconds.values()) >= per_min:
                wait = math.ceil(WINDOW_S - (now - min(seconds)))
                raise UserError(
                    f"not sent: {per_min} messages to {contact.name} in the last minute is the limit; "
                    f"retry in {wait} s, or raise it with `talk policy {contact.name} --send-rate N`"
                )
        for contact, _ in limits:
            seconds = counted.setdefault(contact.fingerprint, {})
            seconds[second] = seconds.get(second, 0) + 1
        kept = {fp: {str(s): n for s, n in seconds.items()} for fp, seconds in counted.items() if seconds}
        write_slots(path, json.dumps(kept, separators=(",", ":")).encode(), at, sync=False)
        if at is None:
            (folder / EARLIER_FILE).unlink(missing_ok=True)


def window(stored: Any, now: float) -> dict[int, int]:
    """{second: sends} of the last minute, from a contact's stored entry; an earlier version's
    list of send times is counted by second too, and what does not parse counts as nothing."""
    if isinstance(stored, list):
        seconds: dict[int, int] = {}
        for t in stored:
            if isinstance(t, int | float) and not isinstance(t, bool):
                seconds[int(t)] = seconds.get(int(t), 0) + 1
    elif isinstance(stored, dict):
        seconds = {int(s): n for s, n in stored.items()
                   if s.lstrip("-").isdigit() and type(n) is int and n > 0}
    else:
        return {}
    return {s: n for s, n in seconds.items() if now - s < WINDOW_S}
