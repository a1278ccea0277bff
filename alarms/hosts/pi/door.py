"""pi's door, the Python half: hands a session's mail to talk's pi extension, exactly once.

talk's pi extension (alarms/hosts/pi/extension) runs inside the pi process and starts this module
as its child: `python -m alarms.hosts.pi.door --session SID --pid PI_PID`. It registers the session
(host `pi`, alive while the pi process is) and speaks NDJSON with the extension:

- its stdout: one line per batch of new mail, `{"ids": [...], "text": FRAMED}`, the text made
  by `alarms.framing.frame` (peer words quoted as data under a header and a footer);
- its stdin: the extension's state first (`{"delivered": [...], "queued": [...]}`), then a line
  each time that changes. `queued` ids were given to pi (`pi.sendMessage`) but have not yet been
  in a model request; `delivered` ids have been in one, whole, as the extension saw in pi's
  `context` event just before the request went out.

The session's cursor moves only when every message it passes over is delivered; until then
each poll reads the spool again from the cursor and prints only the messages neither printed
by this process nor known to the extension. So:

- killed before a print, or between a print and pi taking the batch: the cursor has not moved;
  the extension starts the door again and it prints the batch again (the extension had not
  queued it) or does not (the extension says it is queued or delivered);
- pi killed, or the extension gone: the cursor has not moved past anything not delivered, and
  the extension's state at the next start comes from the session's own entries, where pi keeps
  every message it took; an ended session's unread mail goes back to the inbox (`talk gc`).

The hand-over log (the sender's `delivered` receipt) is written when the cursor moves, so a
receipt means the model's request held the message.

`batch_of` and `covered` decide from values alone; `Door` is the I/O around them.
"""

from __future__ import annotations

import argparse
import json
import os
import select
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from alarms import mailbox
from alarms.door_stdio import emit_stdout, teller
from alarms.framing import frame
from alarms.hosts.pi import NAME as HOST
from durable.files import write_json
from durable.ndjson import parse_records
from spool_writer import handed as handed_log
from spool_writer import process
from spool_writer.cursor import RECENT, load_state, lock_path, read_new
from spool_writer.layout import flocked, generations
from spool_writer.record import SpoolRecord

POLL_S = 0.2


@dataclass
class Known:
    """What this door and the extension know about ids not yet behind the cursor."""

    delivered: set[str] = field(default_factory=set)
    queued: set[str] = field(default_factory=set)
    printed: set[str] = field(default_factory=set)

    def update(self, line: dict[str, Any]) -> None:
        """Apply one line from the extension; anything but lists of strings is ignored."""
        for key, into in (("delivered", self.delivered), ("queued", self.queued)):
            ids = line.get(key)
            if isinstance(ids, list):
                into.update(i for i in ids if isinstance(i, str))
        self.queued -= self.delivered

    def forget(self, ids: Iterable[str]) -> None:
        """Ids the cursor has passed: read_new will not return them again."""
        gone = set(ids)
        self.delivered -= gone
        self.queued -= gone
        self.printed -= gone


def batch_of(records: list[SpoolRecord], known: Known) -> list[SpoolRecord]:
    """The records to print now: those nobody has printed, queued or delivered."""
    skip = known.delivered | known.queued | known.printed
    return [r for r in records if r["id"] not in skip]


def covered(records: list[SpoolRecord], known: Known) -> bool:
    """Whether the cursor may pass these records: every one reached the model."""
    return all(r["id"] in known.delivered for r in records)


def batch_line(records: list[SpoolRecord]) -> str:
    """One NDJSON line; ASCII only, so no U+2028 in it can split it for a JavaScript reader."""
    return json.dumps({"ids": [r["id"] for r in records], "text": frame(records)})


class Door:
    """One session's door: polls the spool, prints batches, moves the cursor on acknowledgement."""

    def __init__(self, mail: mailbox.SessionMail, emit: Callable[[str], None]) -> None:
        self.mail, self.emit = mail, emit
        self.known = Known()

    def step(self) -> None:
        """Move the cursor past delivered mail; print what is new."""
        layout, sid = self.mail.layout, self.mail.sid
        spool_file, cursor_file = layout.session_file(sid), layout.cursor_file(sid)
        if not (spool_file.exists() or generations(spool_file)):
            return
        with flocked(lock_path(cursor_file)) as fd:
            os.utime(fd)  # read now, even if nothing was new: `talk gc` must not retire the session
            state = load_state(cursor_file)
            taken = read_new(spool_file, state, RECENT)
            if taken is None:
                return
            if covered(taken.records, self.known) and taken.state != state:
                handed_log.record(layout.handed, taken.records, sid)  # the sender's receipt
                write_json(cursor_file, taken.state.to_json())
                self.known.forget(r["id"] for r in taken.records)
                return
        fresh = batch_of(taken.records, self.known)
        if fresh:
            self.emit(batch_line(fresh))
            self.known.printed.update(r["id"] for r in fresh)


class Lines:
    """NDJSON lines from a file descriptor, read without blocking past a timeout."""

    def __init__(self, fd: int) -> None:
        self.fd, self.buffer, self.closed = fd, b"", False

    def read(self, timeout: float) -> list[dict[str, Any]]:
        ready, _, _ = select.select([self.fd], [], [], timeout)
        if not ready:
            return []
        chunk = os.read(self.fd, 65536)
        if not chunk:
            self.closed = True
            return []
        *whole, self.buffer = (self.buffer + chunk).split(b"\n")
        return parse_records(whole)


say = teller("pi door")


def serve(door: Door, lines: Lines, alive: Callable[[], bool], poll: float = POLL_S) -> None:
    """Until pi ends or the extension closes our stdin. The extension's first line comes first."""
    while alive() and not lines.closed:
        for line in lines.read(poll):
            door.known.update(line)
        door.step()


def arguments(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m alarms.hosts.pi.door",
                                     description="talk's door into a pi session (started by the extension).")
    parser.add_argument("--session", required=True, help="pi's session id")
    parser.add_argument("--pid", required=True, type=int, help="the pi process")
    return parser.parse_args(argv)


def main(argv: list[str]) -> int:
    args = arguments(argv)
    start = process.start_time(args.pid)

    def alive() -> bool:
        return process.alive(args.pid, start)

    lines = Lines(sys.stdin.fileno())
    # The extension's state comes before anything is printed: a door started again must not
    # print a batch the extension already gave pi.
    first: list[dict[str, Any]] = []
    while alive() and not first and not lines.closed:
        first = lines.read(1.0)
    try:
        mail = mailbox.connect(args.session, HOST, args.pid, alive, say)
        if mail is None:
            return 0
        door = Door(mail, emit_stdout)
        for line in first:
            door.known.update(line)
        serve(door, lines, alive)
    except BrokenPipeError:  # the extension is gone: so is its end of our stdout
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except Exception as exc:  # one line for the extension's log, then exit: it starts us again
        say(f"stopped: {exc}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
