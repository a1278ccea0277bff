"""The files and folders `talk install` writes into an agent host: private whatever the umask.

An agent host runs what its folders hold (hooks, plugins, extensions, MCP servers) as the user.
Made with the process umask, they could be group- or world-writable (umask 002 or 000), and
another user of the machine could add code the host then runs as this one. So every install
writes through here: a new folder is 0700 (its missing parents too), a new file 0600 (0700 when
the host executes it); a file talk rewrites keeps its mode, less any write bit for others.
`talk install` also sets umask 077 for the programs it runs (codex records its hook trust).

`loose` finds what is writable by others among the paths a host's install writes, for
`talk doctor`; `tighten` (`talk doctor --fix`, and every install) takes those write bits away.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Iterable
from pathlib import Path

from durable.files import replace_file

__all__ = [
    "copy_file", "copy_tree", "loose", "make_folders", "private_umask", "tighten", "tree", "write_file",
]

FOLDER_MODE = 0o700
FILE_MODE = 0o600
PROGRAM_MODE = 0o700
OTHERS_WRITE = stat.S_IWGRP | stat.S_IWOTH


def private_umask() -> None:
    """Files made by this process and the programs it starts are the user's alone."""
    os.umask(0o077)


def make_folders(path: Path) -> None:
    """`path` as a folder; it and each missing parent made 0700 (Path.mkdir gives parents the
    umask's mode)."""
    missing = []
    while not path.exists():
        missing.append(path)
        path = path.parent
    for folder in reversed(missing):
        try:
            os.mkdir(folder, FOLDER_MODE)
        except FileExistsError:
            continue  # made meanwhile by someone else: `loose` judges it like any other


def write_file(path: Path, data: bytes, executable: bool = False, mode: int | None = None) -> None:
    """Replace `path` atomically with `data`: 0600 (0700 `executable`), or `mode` less others' write."""
    make_folders(path.parent)
    chosen = (PROGRAM_MODE if executable else FILE_MODE) if mode is None else mode
    replace_file(path, data, mode=chosen & ~OTHERS_WRITE)
    os.chmod(path, chosen & ~OTHERS_WRITE)  # exactly that: the umask may have taken more away


def copy_file(source: Path, target: Path, executable: bool = False) -> None:
    write_file(target, source.read_bytes(), executable)


def copy_tree(source: Path, target: Path, skip: Callable[[Path], bool],
              executable: Callable[[Path], bool]) -> None:
    """Copy the files under `source` into `target` (others there stay), all private; a path
    `skip` names is left out with what is under it."""
    make_folders(target)
    for folder, dirs, files in os.walk(source):
        here = Path(folder)
        dirs[:] = [d for d in dirs if not skip(here / d)]
        for name in files:
            if not skip(here / name):
                rel = (here / name).relative_to(source)
                copy_file(here / name, target / rel, executable(rel))


def loose(paths: Iterable[Path]) -> list[Path]:
    """Those of `paths` that exist and that another user could write to."""
    found = []
    for path in paths:
        try:
            if os.stat(path).st_mode & OTHERS_WRITE:
                found.append(path)
        except OSError:
            continue
    return found


def tighten(paths: Iterable[Path]) -> list[Path]:
    """Take others' write bits from those of `paths` that have them and are the user's (another
    user's stay as they are: `loose` still finds them); the paths changed."""
    fixed = []
    for path in loose(paths):
        st = os.stat(path)
        if st.st_uid == os.geteuid():
            os.chmod(path, st.st_mode & 0o7777 & ~OTHERS_WRITE)
            fixed.append(path)
    return fixed


def tree(root: Path) -> list[Path]:
    """`root` and everything under it, for a folder talk owns whole (a plugin, an extension)."""
    return [root, *sorted(root.rglob("*"))] if root.is_dir() else [root]
