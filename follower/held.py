"""Held mail: messages kept aside, not spooled, until a person releases or drops them.

Mail is held when its sender's policy says `hold` or when it comes faster than the sender's
receive rate. Held mail expires (24 h by default) with an `expired` receipt to its sender.
One JSON file keyed by message id, so holding the same message twice (a resend) keeps one.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from durable.errors import NotFound
from durable.files import read_json, write_json
from durable.locks import folder_locked

HELD_FILE = "held.json"


class HeldBox:
    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.path = folder / HELD_FILE

    def hold(self, record: dict[str, Any], reason: str) -> bool:
        """Keep `record` aside; False if it is held already."""
        with folder_locked(self.folder):
            held: dict[str, Any] = read_json(self.path, {})
            if record["id"] in held:
                return False
            held[record["id"]] = {"record": record, "reason": reason, "held_at": time.time()}
            write_json(self.path, held)
        return True

    def all(self) -> dict[str, dict[str, Any]]:
        held: dict[str, dict[str, Any]] = read_json(self.path, {})
        return held

    def pick(self, which: str) -> list[str]:
        """Ids named by `which`: "all", an id, or a unique prefix of one."""
        held = self.all()
        if which == "all":
            return list(held)
        if which in held:
            return [which]
        found = [i for i in held if len(which) >= 6 and i.startswith(which)]
        if len(found) != 1:
            raise NotFound(f"no held message {which!r}; see `talk held`")
        return found

    def remove(self, ids: list[str]) -> list[dict[str, Any]]:
        """Take these out of the box; returns their entries (those still there)."""
        with folder_locked(self.folder):
            held: dict[str, Any] = read_json(self.path, {})
            taken = [held.pop(i) for i in ids if i in held]
            if taken:
                write_json(self.path, held)
        return taken

    def expired(self, now: float, hours: float) -> list[str]:
        return [i for i, e in self.all().items() if now - float(e["held_at"]) >= hours * 3600]
