"""ReceiveLog: the mail `talk receive` handed out, kept so that `talk show` can show it.

`talk receive` prints mail to whoever ran it and never writes the spool: the spool is what the
agents' doors read, and a message put there would reach an agent a second time. Without a
record of its own, a person who takes mail that way would find only their own side of each
conversation in `talk show`. So each message handed out gets one line in `received.ndjson` in
the identity folder: the fields a spool line carries (`spool_writer.record`), with `received`,
its arrival on this machine's clock, written as the spool writes it.

The line is written and synced before the message is printed, and so before it is acked: a
crash (or a reader of stdout gone) in between leaves a line for mail still on the relay, and
taking it again writes a second line with the same id. A reader therefore shows each id once
(`follower.history.timeline.unseen`), at its first arrival.

Bounded: past TRIM_BYTES the log keeps only its newest KEEP_BYTES, replaced atomically under
the folder's lock, so neither an append nor a full read costs more as the history grows. The
oldest mail taken this way then drops out of `talk show`; the person saw it when it was taken.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from durable.files import replace_file
from durable.locks import folder_locked
from durable.ndjson import append_records, json_lines, read_records
from keys.encoding import utc_now_iso

__all__ = ["KEEP_BYTES", "RECEIVE_LOG_FILE", "TRIM_BYTES", "ReceiveLog"]

RECEIVE_LOG_FILE = "received.ndjson"
TRIM_BYTES = 1024 * 1024  # about 3,000 messages of a few lines each
KEEP_BYTES = TRIM_BYTES // 2  # what a trim keeps: far more than the largest message (gate.MAX_TEXT)


class ReceiveLog:
    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.path = folder / RECEIVE_LOG_FILE

    def add(self, record: dict[str, Any]) -> None:
        """Keep `record` (a message about to be handed out), stamped with its arrival now.

        Raises:
            OSError: the log cannot be written (a full disk): the message is then neither
                printed nor acked, and comes again on the next receive.
        """
        line = {**record, "received": utc_now_iso()}
        with folder_locked(self.folder):  # a trim replaces the file: no append may fall between
            append_records(self.path, [line])
            if self.path.stat().st_size > TRIM_BYTES:
                replace_file(self.path, json_lines(read_records(self.path, KEEP_BYTES)))
