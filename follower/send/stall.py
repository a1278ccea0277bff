"""When an upload stops being retried, and when it is tried again: a transfer's stall.

The follower retries an unfinished transfer every round; some failures never pass by waiting,
and retrying them only fills its log. A transfer stalls, with a one-line reason and what to do:

    the source is gone      deleted, unreadable, or no longer a regular file (`SourceGone`)
    the relay refuses it    file_too_large (the relay's per-file limit): never while the file is
                            the same; file_quota: the recipient's room, which frees slowly, so it
                            is tried again after QUOTA_WAIT_S, not every round

A stall keeps how each part's source looked when it stalled (`look`: a stat, never a read), and
the follower tries the transfer again once a source looks otherwise (the file came back, or was
replaced by a smaller one), or when `talk send` is run again (which always tries, and clears it).

The deciding is pure (`stall_for`, `due`); `look` is the one stat.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable
from typing import Any, NamedTuple

from durable.errors import RelayError, SourceGone

__all__ = ["QUOTA_WAIT_S", "Stall", "due", "look", "stall_for"]

QUOTA_WAIT_S = 15 * 60
MOST_REASON = 300  # a relay's words are shown on one line, cut to this


class Stall(NamedTuple):
    reason: str  # what happened, one line
    hint: str  # what to do
    since: float
    seen: tuple[str, ...]  # each part's source as `look` saw it when the transfer stalled
    retry_at: float | None = None  # tried again from then even if nothing changed (None: never)

    def to_json(self) -> dict[str, Any]:
        return {"reason": self.reason, "hint": self.hint, "since": self.since, "seen": list(self.seen),
                "retry_at": self.retry_at}

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> Stall:
        retry_at = obj.get("retry_at")
        return cls(str(obj["reason"]), str(obj["hint"]), float(obj["since"]),
                   tuple(str(s) for s in obj["seen"]), None if retry_at is None else float(retry_at))


def look(path: str) -> str:
    """How a source looks, cheaply (one stat and an access check): what changes when the file
    comes back, is replaced or is made readable again."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return "missing"
    except OSError as exc:
        return f"error:{exc.errno}"
    if not stat.S_ISREG(st.st_mode):
        return f"other:{stat.S_IFMT(st.st_mode)}"
    readable = "r" if os.access(path, os.R_OK) else "-"
    return f"file:{st.st_dev}:{st.st_ino}:{st.st_size}:{st.st_mtime_ns}:{readable}"


def _one_line(text: str) -> str:
    line = " ".join(text.split())
    return line if len(line) <= MOST_REASON else line[:MOST_REASON] + "…"


def stall_for(exc: BaseException, seen: Iterable[str], now: float, cancel: str) -> Stall | None:
    """The stall an upload's failure calls for, or None when it may pass by trying again
    (the relay away, a rate, a file that changed while it was read). `cancel` is the command
    that cancels this transfer."""
    if isinstance(exc, SourceGone):
        return Stall(_one_line(str(exc)), f"put the file back and the upload goes on by itself, or {cancel}",
                     now, tuple(seen))
    if isinstance(exc, RelayError) and (exc.status, exc.code) == (413, "file_too_large"):
        return Stall(_one_line(f"the relay refused the file: {exc}"),
                     f"{cancel}, and send a smaller file", now, tuple(seen))
    if isinstance(exc, RelayError) and (exc.status, exc.code) == (507, "file_quota"):
        return Stall(_one_line(f"the relay has no room for it now: {exc}"),
                     f"it is tried again every {QUOTA_WAIT_S // 60} minutes; or {cancel}", now, tuple(seen),
                     now + QUOTA_WAIT_S)
    return None


def due(stall: Stall | None, seen: Iterable[str], now: float) -> bool:
    """Whether a transfer is to be tried: not stalled, or a source looks otherwise than when it
    stalled, or its wait is over."""
    if stall is None:
        return True
    return tuple(seen) != stall.seen or (stall.retry_at is not None and now >= stall.retry_at)
