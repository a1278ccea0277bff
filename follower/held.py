"""Held mail: messages kept aside, not spooled, until a person releases or drops them.

Mail is held when its sender's policy says `hold` or when it comes faster than the sender's
receive rate. Held mail expires (24 h by default) with an `expired` receipt to its sender.
One JSON file keyed by message id, so holding the same message twice (a resend) keeps one.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from durable.files import read_json, write_json
from durable.locks import folder_locked
from durable.message_ids import resolve

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
        """Ids named by `which`: "all", or an id or unambiguous prefix of one (`message_ids`).

        Raises:
            UserError: `which` is no id, or a prefix of several.
            NotFound: no held message has that id.
        """
        held = self.all()
        if which == "all":
            return list(held)
        return [resolve(which, held, "held message", "`talk held` lists them")]

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
