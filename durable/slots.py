"""A small state file rewritten in place, durable after one data sync, never read half written.

`durable.files.replace_file` writes a new file and renames it over the old one: a create, a
rename and two syncs (the file's bytes, then its folder), over a millisecond on a common disk.
A state saved on every message (an Olm session advances with each one sent) pays that on every
message. A slotted file is laid out once with two slots, and each later write overwrites the
slot that does not hold the newest state, then syncs the data alone: the file keeps its size
and its blocks, so nothing else needs syncing, and it costs a tenth as much.

Layout: `MAGIC`, the slot size (4 bytes, big-endian), then the two slots, each

    counter (8 bytes) | length (4 bytes) | BLAKE2b-128 of counter, length and payload | payload

and zeros up to the slot size. A write zeroes what a longer state written there before left
past its own end, so no tail of one stays behind: as far as this process wrote into that slot
last (`Slotted.spans`), or, in a file it read rather than wrote, the whole slot. (Zeroing every
slot whole on every write made a session file of 40 KB of state write and sync 256 KB a save.)
A reader takes the slot with the higher counter of those whose digest holds. A write torn by a
kill or a power loss fails the digest, and the other slot, which the write did not touch, holds
the state before it; once `write_slots` returns, the new state survives a power loss. A state
that outgrows its slot lays the file out anew, with slots twice its size, through
`replace_file`. A file without `MAGIC` (one an earlier version wrote
whole) reads as one state, and the next write lays it out.

Nothing older than the last synced state is left to read. Once a synced write has reached the
disk, the same state is written into the other slot too, under the counter before its own: the
state before it (in a ratchet, the keys it has just used and thrown away) is gone from the
file's bytes, not merely outranked. A copy rather than zeros, so that the slot still holds a
whole state on the disk whenever the kernel writes it back: the next writes, unsynced, go to
alternate slots as before, and a power loss that tears one of them finds a whole state in the
other, as it did before this copy. The copy waits for no sync of its own: every reader, and any
copy of the file, sees it at once, and the file's next synced write takes it to the disk. A
power loss before that may bring the older state back on the disk, until the next synced write.
A write without a sync copies nothing, since the slot before it is what a power loss falls back
to; it overwrites the older of the two slots, so the file then holds its newest state and the
one just before it.

Writers must hold a lock of their own around read, change and write, and pass the `Slotted` they
read (or the one the last write returned) to the next write: it says which slot is free. Readers
without the lock may read at any time: a slot being written fails its digest and the other is
read, so they see the state before the write or after it (a read slow enough to see the new
slot half written and then the old one overwritten reads again).
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any, NamedTuple

from durable.digests import blake2b
from durable.files import damaged, open_private, read_private, replace_file

__all__ = ["MAGIC", "MIN_SLOT", "Slotted", "holds", "read_slots", "read_slotted_json", "write_slots"]

MAGIC = b"talkslt1"
MIN_SLOT = 4096
_HEAD = len(MAGIC) + 4
_SLOT_HEAD = 8 + 4 + 16
_READS = 3  # a reader racing a write and the copy after it reads again before it gives up


class Slotted(NamedTuple):
    """A state as read or written: its bytes, its counter, and where it lies (`slot` -1: in a
    file an earlier version wrote whole, which the next write lays out). `spans`: per slot, how
    far from its start bytes other than zeros may lie (this process's last write there; the
    whole slot when not known): what a write must zero."""

    payload: bytes
    counter: int
    slot: int
    size: int
    spans: tuple[int, int] = (0, 0)


def _digest(counter: bytes, length: bytes, payload: bytes) -> bytes:
    return blake2b(counter + length + payload, digest_size=16).digest()


def _slot(payload: bytes, counter: int, span: int = 0) -> bytes:
    """A slot's bytes, filled with zeros up to `span`: no tail of a longer state written there
    before is left behind."""
    c, n = counter.to_bytes(8, "big"), len(payload).to_bytes(4, "big")
    head = c + n + _digest(c, n, payload) + payload
    return head + bytes(span - len(head)) if span > len(head) else head


def _parse(raw: bytes, slot: int, size: int) -> Slotted | None:
    c, n, digest = raw[:8], raw[8:12], raw[12:_SLOT_HEAD]
    length = int.from_bytes(n, "big")
    payload = raw[_SLOT_HEAD:_SLOT_HEAD + length]
    if len(raw) < _SLOT_HEAD or length > size - _SLOT_HEAD or len(payload) != length:
        return None
    if _digest(c, n, payload) != digest:
        return None
    return Slotted(payload, int.from_bytes(c, "big"), slot, size, (size, size))


def read_slots(path: Path) -> Slotted | None:
    """The newest whole state in `path`; None if there is no such file.

    Raises:
        ValueError: the file is laid out in slots and neither holds a whole state.
        UserError: `path` is a symbolic link.
    """
    for _ in range(_READS):
        try:
            data = read_private(path)
        except FileNotFoundError:
            return None
        if not data.startswith(MAGIC):
            return Slotted(data, 0, -1, 0)
        size = int.from_bytes(data[len(MAGIC):_HEAD], "big")
        found = [s for s in (_parse(data[_HEAD + i * size:_HEAD + (i + 1) * size], i, size) for i in (0, 1))
                 if s is not None]
        if found:
            return max(found, key=lambda s: s.counter)
    raise ValueError(f"neither copy of the state in {path.name} is whole")


def read_slotted_json(path: Path, default: Any) -> tuple[Any, Slotted | None]:
    """The JSON state in `path` (laid out in slots, or whole as an earlier version wrote it) and
    where it lies, for the next `write_slots` under the same lock; (`default`, None) if there is
    no such file.

    Raises:
        LocalFileRefused: neither slot holds a whole state, the state is not JSON, or `path` is a
            symbolic link.
    """
    import json

    try:
        at = read_slots(path)
        return (default, None) if at is None else (json.loads(at.payload), at)
    except (OSError, ValueError) as exc:
        raise damaged(path, exc) from exc


# The files `holds` found holding a writer's last state, kept open by this process for that
# writer's next write (`write_slots(..., held=True)`), so a writer that checks and then writes
# one file on every message (an Olm session's, on every send) opens and closes it for neither:
# per path, the descriptor, the file's device and inode, and the pid that opened it. Looked up
# and used under `_OPEN_LOCK`, so that no thread closes a descriptor (making room for another
# file) while another thread reads or writes through it, nor its number is reused meanwhile.
_OPEN: dict[Path, tuple[int, int, int, int]] = {}
_OPEN_LOCK = threading.Lock()
OPEN_MOST = 16


def holds(path: Path, at: Slotted) -> bool:
    """Whether `path` still holds `at` as its newest state, told from the slot headers alone
    (a few bytes, no payload read): for a writer holding its lock, to reuse the state it wrote
    last. Any later write, whole or torn, and any file put in its place changes what this reads.
    The file is kept open for the writer's next `write_slots(..., held=True)`.

    Raises:
        LocalFileRefused: `path` is a symbolic link.
    """
    if at.slot < 0:
        return False
    try:
        named = os.stat(path, follow_symlinks=False)
    except FileNotFoundError:
        return False
    with _OPEN_LOCK:
        kept = _OPEN.get(path)
        if kept is not None and kept[1:] == (named.st_dev, named.st_ino, os.getpid()):
            fd, size = kept[0], named.st_size
        else:
            try:
                fd, size = _keep_open(path)
            except PermissionError:  # a file made read-only: read whole, as if not known (the write says)
                return False
        if size != _HEAD + 2 * at.size:
            return False
        first = os.pread(fd, _HEAD + 8, 0)  # the layout, then the first slot's counter
        second = os.pread(fd, 8, _HEAD + at.size)
    counters = (int.from_bytes(first[_HEAD:], "big"), int.from_bytes(second, "big"))
    return (first[:_HEAD] == MAGIC + at.size.to_bytes(4, "big") and counters[at.slot] == at.counter
            and counters[1 - at.slot] < at.counter)


def _keep_open(path: Path) -> tuple[int, int]:
    """Open `path` to keep (under `_OPEN_LOCK`), in place of the file kept for it before, if any
    (one replaced since, or opened by a parent process), and of the one kept longest if there
    are `OPEN_MOST`; its descriptor and size."""
    old = _OPEN.pop(path, None)
    if old is not None:
        os.close(old[0])
    fd = open_private(path, os.O_RDWR)
    opened = os.fstat(fd)
    if len(_OPEN) >= OPEN_MOST:
        os.close(_OPEN.pop(next(iter(_OPEN)))[0])
    _OPEN[path] = (fd, opened.st_dev, opened.st_ino, os.getpid())
    return fd, opened.st_size


def write_slots(path: Path, payload: bytes, after: Slotted | None, sync: bool = True,
                held: bool = False) -> Slotted:
    """Write `payload` as the state that follows `after` (what `read_slots` gave, or the last
    write returned, under the writer's lock; None: no file yet) and return where it now lies.
    Without `sync` a write in place is left to the kernel: it survives the writer being killed,
    not a power loss (a file laid out anew is synced all the same), and the state before it
    stays in the other slot. With `sync`, once the new state is on the disk it is copied over
    the other slot (see the module's docstring). `held`: `holds(path, after)` said yes, under
    the writer's lock it still holds, so the file it kept open is still the one at `path`.

    Raises:
        OSError: it cannot be written (a full disk, say); the state before it is still there
            (or, if only the copy failed, the new one is, and a retry finds it saved).
    """
    counter = (after.counter if after is not None else 0) + 1
    if after is None or after.slot < 0 or len(payload) + _SLOT_HEAD > after.size:
        size = MIN_SLOT
        while size < 2 * (len(payload) + _SLOT_HEAD):
            size *= 2
        first = _slot(payload, counter)
        replace_file(path, MAGIC + size.to_bytes(4, "big") + first + bytes(2 * size - len(first)))
        return Slotted(payload, counter, 0, size, (len(first), 0))
    slot = 1 - after.slot
    spans = list(after.spans)
    data = _slot(payload, counter, spans[slot])
    offset = _HEAD + slot * after.size
    # Through the descriptor `holds` kept only when no sync is waited for: a sync under
    # `_OPEN_LOCK` would hold up every other thread's check and write meanwhile.
    if not (held and not sync and _write_kept(path, data, offset)):
        fd = open_private(path, os.O_WRONLY)
        try:
            _write(fd, data, offset, path)
            if sync:
                os.fdatasync(fd)
                _overwrite(fd, 1 - slot, after.size, _slot(payload, counter - 1, spans[1 - slot]))
                spans[1 - slot] = _SLOT_HEAD + len(payload)
        finally:
            os.close(fd)
    spans[slot] = _SLOT_HEAD + len(payload)  # zeros from here on: any longer tail was just zeroed
    return Slotted(payload, counter, slot, after.size, (spans[0], spans[1]))


def _write(fd: int, data: bytes, offset: int, path: Path) -> None:
    if os.pwrite(fd, data, offset) != len(data):
        raise OSError(f"{path} took only part of a write")


def _write_kept(path: Path, data: bytes, offset: int) -> bool:
    """Write through the descriptor `holds` kept for `path`, which the caller's lock keeps the
    file named there since; False if none is kept (made room for another file meanwhile)."""
    with _OPEN_LOCK:
        kept = _OPEN.get(path)
        if kept is None or kept[3] != os.getpid():
            return False
        _write(kept[0], data, offset, path)
    return True


def _overwrite(fd: int, slot: int, size: int, data: bytes) -> None:
    """Write `data` over `slot` (no sync: the file's next synced write carries it), only once the
    other slot is durable."""
    if os.pwrite(fd, data, _HEAD + slot * size) != len(data):
        raise OSError("the older state could not be overwritten whole; the disk may be full")
