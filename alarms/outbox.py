"""A door's outbox: mail taken from a session's spool and kept, on disk, until its host settles it.

Every door that hands mail on exactly once takes it the same way (`taking`): under the session's
cursor lock, the new records are read, the door saves them into its own file, and only then is
the cursor saved. A crash before the door's save leaves the mail in the spool; a crash after it
leaves it in the door's file, which remembers the ids it took, so records read again (a crash
between the two saves) are recognised and not taken twice.

What the door keeps, and when its host has the mail, differs by host: `alarms.handover` (hooks
and monitors; the host's transcript shows what it took), `alarms.hosts.opencode.outbox` (a
prompt, posted again until the session took it) and `alarms.hosts.qwen.outbox` (a batch, settled
by Qwen's receipts). The last two keep a state file (`StateFile`) that must not be lost: a
damaged one stops the door, with what to do, instead of dropping its mail.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, Protocol, TypeVar

from durable.errors import UserError
from durable.files import read_json, write_json
from spool_writer.cursor import RECENT, CursorState, load_state, lock_path, read_new
from spool_writer.layout import flocked, generations
from spool_writer.record import SpoolRecord

__all__ = ["StateFile", "Take", "taking"]


@dataclass
class Take:
    """What one take under the cursor's lock read: the cursor as it was, where it goes, and the
    records in between."""

    cursor: CursorState
    after: CursorState | None  # None: no spool file to read
    records: list[SpoolRecord]

    @property
    def moved(self) -> bool:
        """Whether the cursor moves when the take ends (there was something new to read)."""
        return self.after is not None and self.after != self.cursor


@contextmanager
def taking(spool_file: Path, cursor_file: Path, keep: int = RECENT) -> Iterator[Take | None]:
    """Hold the session's cursor lock while the caller saves what it takes; then save the cursor.

    Yields None when the session has no spool yet (nothing is locked). The cursor is saved only
    when the block ends without an exception, so the caller's file always comes first.
    """
    if not (spool_file.exists() or generations(spool_file)):
        yield None
        return
    with flocked(lock_path(cursor_file)) as fd:
        os.utime(fd)  # read now, even if nothing was new: `talk gc` must not retire the session
        cursor = load_state(cursor_file)
        taken = read_new(spool_file, cursor, keep)
        take = Take(cursor, None, []) if taken is None else Take(cursor, taken.state, taken.records)
        yield take
        if take.after is not None and take.moved:
            write_json(cursor_file, take.after.to_json())


class Saved(Protocol):
    def to_json(self) -> dict[str, Any]: ...


S = TypeVar("S", bound=Saved)


class StateFile(Generic[S]):
    """A daemon door's state file; one process uses it at a time (the door's lock). Missing: the
    empty state. Damaged: UserError, since the mail it holds may not have reached `host`."""

    def __init__(self, path: Path, empty: Callable[[], S], parse: Callable[[dict[str, Any]], S],
                 host: str) -> None:
        self.path, self._empty, self._parse, self._host = path, empty, parse, host

    def load(self) -> S:
        data = read_json(self.path, None)
        if data is None:
            return self._empty()
        try:
            return self._parse(data)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise UserError(f"{self.path} is damaged ({exc!r}); its mail may not have reached "
                            f"{self._host}: read it, then move it aside and start the door again") from exc

    def save(self, state: S) -> None:
        write_json(self.path, state.to_json())
