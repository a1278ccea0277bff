"""The follower's thread for files: takes parked messages' files while the main loop takes mail.

A file of hundreds of megabytes must not hold up a short message from someone else, so the
downloads run here, on their own relay connection and their own spool writer (the spool takes
one per thread: `spool_writer.spool.Spool`), woken when the receiver parks a message and every
`POLL_S` besides. A fault of this machine or of the relay backs off and tries again; the taker
resumes each download from its last saved point (`follower.files.taker`).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

from follower.receive.parking import file_taker
from follower.relay.backoff import RETRY
from follower.relay.client import RelayClient
from keys.contacts import ContactBook
from keys.identity import Identity
from spool_writer.record import SpoolRecord
from spool_writer.spool import Spool

__all__ = ["FileThread"]

log = logging.getLogger("talk.follower")
POLL_S = 5.0


class FileThread(threading.Thread):
    """`delivered` hears of each message handed on; `failed` of each fault (for `talk status`)."""

    def __init__(self, identity: Identity, folder: Path, url: str, delivered: Callable[[], None],
                 failed: Callable[[Exception], None]) -> None:
        super().__init__(name="files", daemon=True)
        self.wake = threading.Event()
        self.stopping = False
        self.spool = Spool(folder / "spool")
        self.client = RelayClient(url, sessions=True)
        self.delivered = delivered
        self.failed = failed
        self.taker = file_taker(identity, folder, self.client, ContactBook(folder), self.deliver, "spooled")

    def deliver(self, record: dict[str, Any]) -> None:
        if self.spool.deliver(cast(SpoolRecord, record)):
            self.delivered()

    def stop(self) -> None:
        self.stopping = True
        self.wake.set()

    def run(self) -> None:
        failures = 0
        while not self.stopping:
            self.wake.clear()
            try:
                self.taker.take_all()
                failures = 0
            except Exception as exc:  # never exit: the message stays parked, tried again
                failures += 1
                self.failed(exc)
            self.wake.wait(RETRY.delay(failures) if failures else POLL_S)
        self.client.close()
