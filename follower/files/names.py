"""Where a received file lands: a safe name in the identity's downloads folder, placed once.

The name a peer gives a file is a wish, never a path. `safe_name` keeps what reads as the same
name and drops the rest: path separators (and the characters that look like one once
normalised), a leading dot (no hidden file, no "." or ".."), control, format and bidi characters
(no name that reads otherwise on screen than on disk), the characters Windows forbids and its
device names (CON, NUL, COM1, ...: a file copied there must not turn into a device), and
whatever passes `MAX_NAME_BYTES`; nothing left gives "file".

`place` moves a verified file from the private partial folder into downloads in one step that
never replaces anything: a hard link under the first free name ("name (2).ext", ...), which fails
rather than follow or overwrite whatever is there (a planted symbolic link included), then the
partial name goes. The downloads folder itself must be a real folder of ours
(`durable.files.ensure_private_dir`), opened without following a link, so a link planted in its
place cannot send the file elsewhere. A kill between the link and the unlink leaves both names
on one file: `place` given the name it chose before finds its own file there and finishes.
"""

from __future__ import annotations

import errno
import os
import re
import unicodedata
from collections.abc import Callable
from pathlib import Path

from durable.errors import LocalFileRefused
from durable.files import ensure_private_dir, fsync_dir
from durable.printable import is_printable

__all__ = ["DOWNLOADS", "MAX_NAME_BYTES", "candidates", "place", "safe_name"]

DOWNLOADS = "downloads"
MAX_NAME_BYTES = 200  # of 255 a name may take on disk: room for " (99999)"
MAX_EXT = 16
FALLBACK = "file"
MAX_TRIES = 10_000
# Separators, and what NFKC leaves looking like one (fraction, division and reverse slashes).
_SEPARATORS = "/\\\u2044\u2215\u2216\u29f5\u29f8\u29f9\ufe68"
_WINDOWS = '<>:"|?*'
_DEVICES = re.compile(r"(?:con|prn|aux|nul|clock\$|conin\$|conout\$|(?:com|lpt)[0-9\u00b9\u00b2\u00b3])",
                      re.IGNORECASE)


def safe_name(wish: str) -> str:
    """A file name from a peer's `wish` that is safe to create in a folder of ours."""
    name = unicodedata.normalize("NFKC", wish)
    name = "".join("_" if c in _SEPARATORS or c in _WINDOWS else c for c in name
                   if is_printable(c) and unicodedata.category(c)[0] != "C")
    name = name.strip(" .")  # no hidden file, no "." or "..", nothing Windows cuts off
    stem, dot, ext = name.rpartition(".")
    if not dot or len(ext) > MAX_EXT or not stem:
        stem, dot, ext = name, "", ""
    if _DEVICES.fullmatch(stem.split(".")[0].rstrip(" ")):
        stem = "_" + stem
    stem = _cut(stem, MAX_NAME_BYTES - len((dot + ext).encode())).rstrip(" .")
    return stem + dot + ext if stem else FALLBACK + dot + ext


def _cut(text: str, most: int) -> str:
    """`text` cut to at most `most` bytes of UTF-8, on a character's edge."""
    return text.encode()[:most].decode(errors="ignore")


def candidates(name: str) -> list[str]:
    """The names to try for `name` (already safe), in order: itself, then "stem (2).ext", ..."""
    stem, dot, ext = name.rpartition(".")
    if not dot or not stem:
        stem, dot, ext = name, "", ""
    return [name, *(f"{stem} ({n}){dot}{ext}" for n in range(2, MAX_TRIES))]


def place(partial: Path, downloads: Path, name: str, chosen: str | None = None,
          choosing: Callable[[str], None] = lambda candidate: None) -> Path:
    """Link the finished file `partial` into `downloads` under the first free form of `name` (safe
    already), then remove `partial`; the path it landed at. `choosing` hears each name before it
    is tried (the caller keeps it durably); `chosen`, the last one a killed earlier call heard, is
    taken when it holds this file already, or when `partial` is gone (it was linked, then removed).

    Raises:
        LocalFileRefused: `downloads` is a symbolic link or not a folder of ours, or every
            candidate name is taken.
    """
    ensure_private_dir(downloads, "downloads folder")
    folder = os.open(downloads, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        landed = _already(partial, folder, chosen) or _link(partial, folder, name, choosing)
        partial.unlink(missing_ok=True)
        os.fsync(folder)
        fsync_dir(partial.parent)
    finally:
        os.close(folder)
    return downloads / landed


def _already(partial: Path, folder: int, chosen: str | None) -> str | None:
    if chosen is None:
        return None
    try:
        there = os.stat(chosen, dir_fd=folder, follow_symlinks=False)
    except FileNotFoundError:
        return None
    try:
        ours = os.stat(partial, follow_symlinks=False)
    except FileNotFoundError:  # linked, then unlinked: only the link at `chosen` is left
        return chosen
    return chosen if (there.st_dev, there.st_ino) == (ours.st_dev, ours.st_ino) else None


def _link(partial: Path, folder: int, name: str, choosing: Callable[[str], None]) -> str:
    for candidate in candidates(name):
        choosing(candidate)
        try:
            # link(2) never follows a link at its target and never replaces: EEXIST instead.
            os.link(partial, candidate, dst_dir_fd=folder, follow_symlinks=False)
        except FileExistsError:
            continue
        except OSError as exc:
            if exc.errno == errno.ENAMETOOLONG:
                continue
            raise
        return candidate
    raise LocalFileRefused(f"every name for {name!r} in the downloads folder is taken; move some files "
                           "out of it and run the follower again")
