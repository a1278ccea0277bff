"""Whether another process holds a lock file: the look, from the standard library alone.

`durable.locks` holds locks; this only looks, and is apart so that a hook run on every agent
turn can look without importing what holding needs (pathlib, contextlib: ~15 ms of start-up).
"""

from __future__ import annotations

import fcntl
import os

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: importing typing costs a hook ~3 ms
if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["held_by_other"]


def open_no_follow(path: str | os.PathLike[str]) -> int:
    return os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)


def held_by_other(path: str | os.PathLike[str],
                  opener: Callable[[str | os.PathLike[str]], int] = open_no_follow) -> bool:
    """Whether a live process holds `path`'s lock (`durable.locks.hold_for_life`); False when
    there is no such file. The look takes a shared lock for an instant, so two lookers never
    make each other see a holder. `opener` opens the file read-only, never through a link.

    Raises:
        OSError: the file is there but cannot be opened (a symbolic link: ELOOP).
    """
    try:
        fd = opener(path)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False
