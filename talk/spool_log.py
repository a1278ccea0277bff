"""The spool as a person reads it (`talk log`, `talk forward`): every line, damage named.

The alarms' cursor (`spool_writer.cursor`) hands each message on once and silently passes
over lines that are not messages. A person looking at the spool is told instead: a torn,
non-JSON or incomplete line is reported by file and line number, and the lines around it are
shown as usual. `SpoolLog` remembers where it stopped in each file by inode, so a rotation
(a rename into `.1`) neither loses lines nor shows them again while `talk log -f` runs.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import cast

from durable.files import open_private
from durable.message_ids import short
from durable.ndjson import complete_lines
from spool_writer.layout import oldest_first
from spool_writer.lines import read_from
from spool_writer.record import SpoolRecord, fault

__all__ = ["Damaged", "SpoolLog", "log_line", "parse_line"]


@dataclass(frozen=True)
class Damaged:
    path: Path
    line: int  # counted from 1
    why: str

    def note(self) -> str:
        return f"damaged line {self.line} in {self.path} (skipped): {self.why}"


def parse_line(line: bytes) -> SpoolRecord | str:
    """The record a spool line holds, or why it holds none."""
    try:
        obj = json.loads(line)
    except ValueError:
        return "not JSON (a write cut short?)"
    why = fault(obj)
    return why if why is not None else cast(SpoolRecord, obj)


def log_line(record: SpoolRecord) -> str:
    """One message for a person: local time, short id (what `talk forward` takes), sender, kind
    unless plain chat, text. Not yet made printable: `talk.output.result` does that."""
    kind = "" if record["kind"] == "chat" else f" ({record['kind']})"
    text = record["text"].replace("\n", "\n    ")
    return f"{_local_time(record)}  {short(record['id'])}  {record['name']}{kind}: {text}"


def _local_time(record: SpoolRecord) -> str:
    stamp = record.get("received") or record["ts"]
    try:
        return datetime.fromisoformat(stamp).astimezone().strftime("%Y-%m-%d %H:%M:%S")
    except ValueError:
        return stamp or "?"


@dataclass
class SpoolLog:
    """What is new in some spool files since the last `read`; a message copied into several
    sessions' files comes once."""

    _at: dict[int, tuple[int, int]] = field(default_factory=dict)  # inode -> (offset, lines)
    _shown: set[str] = field(default_factory=set)

    def read(self, spools: list[Path]) -> tuple[list[SpoolRecord], list[Damaged]]:
        """New records, oldest first, and the damaged lines passed over, from each spool file
        in `spools` and its rotated generations."""
        records: list[SpoolRecord] = []
        damaged: list[Damaged] = []
        for spool in spools:
            for path in oldest_first(spool):
                for number, parsed in self._new_lines(path, finished=path != spool):
                    if isinstance(parsed, str):
                        damaged.append(Damaged(path, number, parsed))
                    elif parsed["id"] not in self._shown:
                        self._shown.add(parsed["id"])
                        records.append(parsed)
        records.sort(key=lambda r: r.get("received") or r["ts"])
        return records, damaged

    def _new_lines(self, path: Path, finished: bool) -> list[tuple[int, SpoolRecord | str]]:
        """(line number, record or why not) for each line of `path` not read yet. A last line
        without its newline is still being written, unless the file is `finished` (rotated)."""
        try:
            fd = open_private(path, os.O_RDONLY)
        except FileNotFoundError:
            return []
        try:
            st = os.fstat(fd)
            offset, count = self._at.get(st.st_ino, (0, 0))
            if st.st_size < offset:
                offset, count = 0, 0  # truncated: read it again from its start
            data = read_from(fd, offset)
        finally:
            os.close(fd)
        whole, used = complete_lines(data)
        found: list[tuple[int, SpoolRecord | str]] = [
            (count + i + 1, parse_line(line)) for i, line in enumerate(whole)]
        if finished and used < len(data):
            whole.append(data[used:])
            found.append((count + len(whole), "cut short (no newline)"))
            used = len(data)
        self._at[st.st_ino] = (offset + used, count + len(whole))
        return found
