"""The ids already handed on, so a message fetched twice is shown once.

An append-only file of `epoch id` lines, fsynced per id: a crash loses at most a torn last
line, whose message then comes again and is shown again only if it was never shown at all.
It is compacted to the last `keep_s` seconds when it grows large.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from keys.storage import open_private, read_private, replace_file

SEEN_FILE = "seen.log"
KEEP_S = 60 * 86400  # longer than any relay keeps undelivered mail
COMPACT_AT = 50_000


class SeenIds:
    def __init__(self, folder: Path, keep_s: float = KEEP_S) -> None:
        self.path = folder / SEEN_FILE
        self.keep_s = keep_s
        self._entries = self._load()

    def _load(self) -> dict[str, float]:
        entries: dict[str, float] = {}
        try:
            text = read_private(self.path).decode(errors="replace")
        except FileNotFoundError:
            return entries
        for line in text.splitlines():
            stamp, _, msg_id = line.partition(" ")
            try:
                entries[msg_id] = float(stamp)
            except ValueError:
                continue  # a torn last line
        return entries

    def __contains__(self, msg_id: object) -> bool:
        return msg_id in self._entries

    def add(self, msg_id: str) -> None:
        now = time.time()
        fd = open_private(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
        try:
            os.write(fd, f"{now:.0f} {msg_id}\n".encode())
            os.fsync(fd)
        finally:
            os.close(fd)
        self._entries[msg_id] = now
        if len(self._entries) > COMPACT_AT:
            self.compact(now)

    def compact(self, now: float) -> None:
        kept = {i: t for i, t in self._entries.items() if t > now - self.keep_s}
        replace_file(self.path, "".join(f"{t:.0f} {i}\n" for i, t in kept.items()).encode())
        self._entries = kept
