"""The follower finishes file transfers whose `talk send --file` died (killed, a relay away).

A transfer's lock is held by whoever uploads it (`follower.send.upload.complete`): a command
still running holds it, and a dead one holds nothing, so the follower takes up exactly the
transfers nobody is working on, and two never run one transfer. A transfer that cannot go on
by retrying (its source gone, a file over the relay's limit) stalls and is logged once; it is
taken up again when its source changes (`follower.send.stall`). The uploads run on a thread of
their own, with a relay client of their own: a 200 MB file must not hold up the mail.
"""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path

from durable.errors import TalkError
from follower.relay.client import RelayClient
from follower.send.outbound import Queued
from follower.send.outbox import Outbox
from follower.send.stall import due, look
from follower.send.transfer import TransferBook
from follower.send.upload import complete
from keys.contacts import ContactBook
from keys.identity import Identity

__all__ = ["Uploads"]

# A transfer this young belongs to the command that just recorded it and is about to lock it.
FRESH_S = 5.0
log = logging.getLogger("talk.follower")


class Uploads:
    def __init__(self, identity: Identity, folder: Path, relay_url: str) -> None:
        self.identity = identity
        self.folder = folder
        self.relay_url = relay_url
        self.book = TransferBook(folder)
        self._thread: threading.Thread | None = None

    def due(self, now: float) -> list[str]:
        """The ids of the transfers old enough to be left to the follower, less the stalled ones
        nothing has changed for (a stat of each source: `follower.send.stall`)."""
        return [t.id for t in self.book.pending() if now - t.created >= FRESH_S
                and (t.stall is None or due(t.stall, [look(p.path) for p in t.parts], now))]

    def run(self, now: float | None = None) -> bool:
        """Start finishing what was left, unless that already runs; whether a thread started."""
        if self._thread is not None and self._thread.is_alive():
            return False
        due = self.due(time.time() if now is None else now)
        if not due:
            return False
        self._thread = threading.Thread(target=self.finish, args=(due,), name="uploads", daemon=True)
        self._thread.start()
        return True

    def finish(self, transfer_ids: list[str]) -> None:
        """Each transfer in turn that no other process holds; a failure leaves it for next time."""
        contacts, outbox = ContactBook(self.folder), Outbox(self.folder)
        with RelayClient(self.relay_url) as client:
            for transfer_id in transfer_ids:
                transfer = self.book.get(transfer_id)
                contact = None if transfer is None else contacts.by_fingerprint(transfer.to)
                if contact is None:
                    continue
                try:
                    if complete(self.identity, client, contact, outbox, self.book, transfer_id, wait=False):
                        log.info("finished the upload of transfer %s to %s", transfer_id, contact.name)
                except Queued:
                    pass  # its message is in the outbox: the resends take it from here
                except (TalkError, OSError) as exc:
                    stalled = self.book.get(transfer_id)
                    if stalled is not None and stalled.stall is not None:  # logged once: not tried again
                        log.warning("the upload of transfer %s stalled: %s; %s", transfer_id,
                                    stalled.stall.reason, stalled.stall.hint)
                    else:
                        log.info("the upload of transfer %s waits: %s", transfer_id, exc)

    def join(self, timeout: float | None = None) -> None:
        if self._thread is not None:
            self._thread.join(timeout)
