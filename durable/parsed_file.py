"""A JSON file parsed once and parsed again only when it changed on disk.

The follower consults the contact book, the policies and the invites for every message; each
read is an open, a read and a parse, where one `stat` tells whether anything changed. Every
writer here replaces its file atomically (`durable.files.replace_file`), so a change always
shows as a new inode, and an edit in place at least as a new size or modification time.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, Generic, TypeVar

from durable.files import read_json

__all__ = ["ParsedFile", "Signature", "signature"]

T = TypeVar("T")

# The file's identity as `stat` reports it; None: no such file.
Signature = tuple[int, int, int] | None


def signature(path: Path) -> Signature:
    """What tells one version of a file from another: a replace gives a new inode, a write in
    place a new size or change time (which, unlike the modification time, no program can set)."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return st.st_ino, st.st_size, st.st_ctime_ns


class ParsedFile(Generic[T]):
    """`parse` of the JSON in `path` (of `default` when there is none). The value is shared
    between calls: `parse` should build something its callers do not change. A file that fails
    to read or parse raises each time (`read_json`), and nothing is kept."""

    def __init__(self, path: Path, default: Any, parse: Callable[[Any], T]) -> None:
        self.path = path
        self.default = default
        self.parse = parse
        self._kept: tuple[Signature, T] | None = None

    def get(self) -> T:
        # Taken before the read: a change in between is seen, and read again, next time.
        seen = signature(self.path)
        kept = self._kept
        if kept is not None and kept[0] == seen:
            return kept[1]
        value = self.parse(read_json(self.path, self.default))
        self._kept = (seen, value)
        return value
