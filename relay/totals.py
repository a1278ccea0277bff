"""A SQLite relay's running totals per mailbox and per channel, held in memory.

A deposit checks its mailbox's quota and its channel's share (`relay.store`); reading them from
tables kept in the same transaction as each insert cost four statements of every deposit. The
totals are rebuilt from the mail at every start anyway, so they live here: a check is a lookup,
and a deposit can be decided before its row is written (`Hold`).

Changes made inside a transaction are journaled: `keep` once it commits, `undo` once it rolls
back, so the totals always match the committed mail plus the deposits decided and not yet
written (held). Entries that fall to zero go, so memory follows the mail waiting, not history.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

__all__ = ["Hold", "MailboxTotals"]

Box = tuple[int, int, int, int]  # messages and bytes under registered tags, then under others
Channel = tuple[int, int]  # one tag's messages and bytes


@dataclass
class Hold:
    """A deposit decided but not yet written: counted until `MailboxTotals.release`."""

    fp: str
    tag: str
    known: bool
    size: int
    held: bool = True


class MailboxTotals:
    def __init__(self) -> None:
        self._boxes: dict[str, Box] = {}
        self._channels: dict[tuple[str, str], Channel] = {}
        self._journal: list[tuple[str, str, bool, int, int]] = []

    def load(self, boxes: Iterable[tuple[str, int, int, int, int]],
             channels: Iterable[tuple[str, str, int, int]]) -> None:
        """Start again from totals summed over the stored mail (nothing journaled, nothing held)."""
        self._boxes = {fp: (count, size, junk, junk_size) for fp, count, size, junk, junk_size in boxes}
        self._channels = {(fp, tag): (count, size) for fp, tag, count, size in channels}
        self._journal.clear()

    def box(self, fp: str) -> Box:
        return self._boxes.get(fp, (0, 0, 0, 0))

    def channel(self, fp: str, tag: str) -> Channel:
        return self._channels.get((fp, tag), (0, 0))

    def room(self, fp: str, known: bool, size: int, messages: int, total: int) -> bool:
        """Whether `size` more bytes fit the quota of their kind (`messages`, `total` bytes)."""
        box = self.box(fp)
        count, used = (box[0], box[1]) if known else (box[2], box[3])
        return count < messages and used + size <= total

    def tag_room(self, fp: str, tag: str, size: int, messages: int | None, total: int | None) -> bool:
        """Whether `size` more bytes fit one tag's share (`messages`, `total` bytes; None: no cap)."""
        count, used = self.channel(fp, tag)
        return (messages is None or count < messages) and (total is None or used + size <= total)

    def stored(self) -> int:
        return sum(box[0] + box[2] for box in self._boxes.values())

    def count(self, fp: str, tag: str | None, known: bool, messages: int, size: int) -> None:
        """Move a mailbox's totals of one kind, and its tag's unless `tag` is None (journaled)."""
        self._move(fp, tag, known, messages, size)
        self._journal.append((fp, tag or "", known, messages, size))

    def hold(self, fp: str, tag: str, known: bool, size: int) -> Hold:
        """Count a deposit decided now and written by a later transaction (never undone by a
        rollback: only `release` takes it back, once the transaction writing it has begun)."""
        self._move(fp, tag, known, 1, size)
        return Hold(fp, tag, known, size)

    def release(self, hold: Hold) -> None:
        """Take back what `hold` counted (once, however often called): the transaction that
        writes the row counts it again, journaled, or drops it with the rest."""
        if hold.held:
            hold.held = False
            self._move(hold.fp, hold.tag, hold.known, -1, -hold.size)

    def keep(self) -> None:
        """The transaction committed: its changes stay."""
        self._journal.clear()

    def undo(self) -> None:
        """The transaction rolled back: its changes go, last first."""
        for fp, tag, known, messages, size in reversed(self._journal):
            self._move(fp, tag or None, known, -messages, -size)
        self._journal.clear()

    def _move(self, fp: str, tag: str | None, known: bool, messages: int, size: int) -> None:
        count, used, junk, junk_used = self._boxes.get(fp, (0, 0, 0, 0))
        if known:
            count, used = count + messages, used + size
        else:
            junk, junk_used = junk + messages, junk_used + size
        if count > 0 or junk > 0:
            self._boxes[fp] = (count, used, junk, junk_used)
        else:
            self._boxes.pop(fp, None)
        if tag is None:
            return
        tag_count, tag_used = self._channels.get((fp, tag), (0, 0))
        if tag_count + messages > 0:
            self._channels[(fp, tag)] = (tag_count + messages, tag_used + size)
        else:
            self._channels.pop((fp, tag), None)
