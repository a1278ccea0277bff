"""Mail refused on its own account: acked on the relay, kept here with the reason.

A blob that does not open, is sealed by a key no contact pins, names the wrong sender, or holds a
field the gate refuses is the sender's or the relay's doing, never this machine's. Left on the
relay it would come back first on every fetch and every later message would wait behind it, so
it is acked like any other, and one line goes to `quarantine.ndjson` in the identity folder:

    {"at": epoch, "reason": "...", "tag": relay tag, "relay_id": ..., "from": fp|null,
     "id": message id|null, "blob": base64 (or null past MAX_BLOB_KEPT)}

The line is on disk (fsynced) before the ack, like a spool line. Only faults of this machine
(OSError: a full disk, permissions) stop acking; nothing a peer or the relay sends can make the
line fail to write: its texts are cut to MAX_TEXT_KEPT and made printable (`safe_text`). The file
is rotated to `quarantine.ndjson.1` past MAX_BYTES, so it never grows without bound; `talk status`
counts both generations.

A refused message is not always lost: one refused for want of a session, or for a reused number
(its sender's folder restored from a backup), comes again under its own id, sent again by its
sender in a new session or under a fresh number (`follower.send.resending`). `settled` marks an entry
whose id was later handed on (to the spool or to `talk receive`) as recovered, so `talk
quarantine` and `talk status` count as gone only what never arrived.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from durable.ndjson import append_records, read_records
from durable.printable import printable
from follower.history.receivelog import RECEIVE_LOG_FILE
from keys.encoding import b64e
from spool_writer.index import DeliveredIndex
from spool_writer.layout import SpoolLayout

__all__ = ["Quarantine", "arrived_ids", "settled"]

QUARANTINE_FILE = "quarantine.ndjson"
MAX_BYTES = 4 * 1024 * 1024
MAX_BLOB_KEPT = 70_000  # a whole envelope; bigger is not talk's and is kept without its bytes
MAX_TEXT_KEPT = 1000  # a reason, a tag or an id: longer ones quote a peer's bytes, which the blob keeps


def safe_text(text: str, most: int = MAX_TEXT_KEPT) -> str:
    """`text` as one printable line of at most `most` characters that always encodes as UTF-8
    (a lone surrogate, which an error may quote, is written as its escape, like a control)."""
    cut = text[:most].encode("utf-8", "backslashreplace").decode("utf-8")
    return printable(cut)[:most]  # escapes lengthen it: cut again (at worst through an escape)


class Quarantine:
    def __init__(self, folder: Path) -> None:
        self.path = folder / QUARANTINE_FILE
        self.older = folder / (QUARANTINE_FILE + ".1")

    def keep(self, relay_id: str, tag: str, blob: bytes, reason: str, sender: str | None = None,
             msg_id: str | None = None) -> None:
        self._rotate()
        append_records(self.path, [{
            "at": round(time.time(), 3), "reason": safe_text(reason), "tag": safe_text(tag),
            "relay_id": safe_text(relay_id), "from": sender, "id": msg_id,
            "blob": b64e(blob) if len(blob) <= MAX_BLOB_KEPT else None,
        }])

    def _rotate(self) -> None:
        try:
            if self.path.stat().st_size > MAX_BYTES:
                os.replace(self.path, self.older)
        except FileNotFoundError:
            pass

    def entries(self) -> list[dict[str, Any]]:
        """Oldest first, both generations."""
        return read_records(self.older) + read_records(self.path)

    def count(self) -> int:
        return len(self.entries())

    def lost(self) -> list[dict[str, Any]]:
        """The entries whose message never arrived later (see `settled`)."""
        return [e for e in settled(self.entries(), arrived_ids(self.path.parent)) if not e["recovered"]]


def settled(entries: list[dict[str, Any]], arrived: Callable[[str], bool]) -> list[dict[str, Any]]:
    """`entries`, each with `recovered`: whether its message was later handed on after all."""
    return [{**e, "recovered": isinstance(e.get("id"), str) and arrived(e["id"])} for e in entries]


def arrived_ids(folder: Path) -> Callable[[str], bool]:
    """Whether a message id was handed on in identity `folder`: written whole to the spool, or
    printed by `talk receive` (its log keeps the newest of those)."""
    index = DeliveredIndex(SpoolLayout(folder / "spool").index)
    index.refresh()
    printed = {r.get("id") for r in read_records(folder / RECEIVE_LOG_FILE)}
    return lambda msg_id: index.delivered(msg_id) or msg_id in printed
