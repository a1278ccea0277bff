"""Moving unread mail from one spool to another: the inbox to a session that registers, and a
departing session's unread lines back to the inbox.

The caller holds the spool lock, appends here first and removes the source after, so a crash
in between leaves a message in both places, never in neither; lines whose id the destination
already holds are skipped, so repeating the move after such a crash adds nothing.
"""

from __future__ import annotations

from pathlib import Path

from spool_writer import lines
from spool_writer.index import DeliveredIndex
from spool_writer.layout import SpoolLayout, oldest_first


def ids_in(spool_file: Path) -> set[str]:
    """The ids in a spool file and all its generations."""
    found = (lines.id_of(line) for path in oldest_first(spool_file) for line in lines.read_lines(path))
    return {msg_id for msg_id in found if msg_id is not None}


def move(
    index: DeliveredIndex, layout: SpoolLayout, moving: list[bytes], dest: Path,
    max_bytes: int, generations: int,
) -> int:
    """Append the message lines in `moving` that `dest` lacks, with one write; return how many.

    A moved line whose delivery a crash cut short is recorded as reaching `dest` too, so the
    redelivery that completes it does not write it there a second time.
    """
    held = ids_in(dest)
    fresh: list[tuple[str, bytes]] = []
    for line in moving:
        msg_id = lines.id_of(line)
        if msg_id is not None and msg_id not in held:
            held.add(msg_id)
            fresh.append((msg_id, line))
    if not fresh:
        return 0
    name = layout.target_name(dest)
    index.note_tail(dest, name)
    lines.rotate_if_full(dest, max_bytes, generations)
    lines.append(dest, b"".join(line for _, line in fresh))
    for msg_id, _ in fresh:
        if not index.delivered(msg_id):
            index.mark_partial(msg_id, name)
    return len(fresh)
