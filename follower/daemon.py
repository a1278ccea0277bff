"""The follower: fetch → open → spool (durable) → ack, woken by push, polling as a safety net.

It never exits on a network or relay error: it records the error for `talk status`, backs
off with jitter and tries again. A crash anywhere leaves unacked mail on the relay; the spool
drops the copy it already has by message id.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from pathlib import Path
from types import FrameType
from typing import Any

from follower.backoff import delay
from follower.client import RelayClient
from follower.inbound import LINGER_S, Inbox
from follower.push import PushListener
from follower.receipts import ReceiptBatch
from follower.state import FollowConfig, FollowStatus
from follower.upkeep import Upkeep, follower_delay
from keys.contacts import Contact, ContactBook
from keys.errors import TalkError
from keys.identity import Identity
from keys.invites import InviteBook
from spool_writer.spool import Spool

log = logging.getLogger("talk.follower")
UPKEEP_TICK_S = 0.2


class SpoolDedup:
    """The spool is the record of what was handed on: ask it, not a second file."""

    def __init__(self, spool: Spool) -> None:
        self.spool = spool

    def __contains__(self, msg_id: object) -> bool:
        return isinstance(msg_id, str) and self.spool.knows(msg_id)

    def add(self, msg_id: str) -> None:
        """Nothing to do: `Spool.deliver` recorded the id with the line."""


class Follower:
    def __init__(self, identity: Identity, folder: Path, relay: str) -> None:
        self.identity = identity
        self.folder = folder
        # A long-lived client: one signed request opens a session, later fetches are MACed.
        self.client = RelayClient(relay, sessions=True)
        self.contacts = ContactBook(folder)
        self.spool = Spool(folder / "spool")
        # Receipts wait a random pause after the fetch that caused them; the upkeep sends them.
        receipts = ReceiptBatch(delay=follower_delay())
        self.inbox = Inbox(identity, self.client, self.contacts, InviteBook(folder),
                           SpoolDedup(self.spool), batch_acks=True, linger_s=LINGER_S,
                           handed_state="spooled", receipts=receipts)
        self.upkeep = Upkeep(identity, folder, self.client, receipts)
        self.wake = threading.Event()
        self.stopping = False
        self.reload = True
        self.config = FollowConfig()
        self.status = FollowStatus(pid=os.getpid(), relay=relay, since=time.time())

    def deliver(self, record: dict[str, Any]) -> None:
        if self.spool.deliver(record):
            self.status.delivered += 1

    def peers(self) -> list[Contact]:
        chosen = []
        for name in self.config.peers:
            try:
                chosen.append(self.contacts.get(name))
            except TalkError as exc:
                log.warning("skipping peer %s: %s", name, exc)
        return chosen

    def drain(self) -> None:
        report = self.inbox.receive(self.deliver, self.peers())
        for reason in report.refused:
            log.warning("refused: %s", reason)
        for note in report.notes:
            log.info("%s", note)
        self.status.refused += len(report.refused)
        self.status.last_contact = time.time()
        self.status.last_error = None

    def on_signal(self, signum: int, frame: FrameType | None) -> None:
        if signum == signal.SIGUSR1:
            self.reload = True
        else:
            self.stopping = True
        self.wake.set()

    def set_push(self, state: str) -> None:
        self.status.push = state

    def run(self) -> None:
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGUSR1):
            signal.signal(sig, self.on_signal)
        self.config = FollowConfig.load(self.folder)
        push = None
        if self.config.push:
            push = PushListener(self.client.url, self.identity, self.wake, self.set_push)
            push.start()
        log.info("following %s on %s (pid %d)", ", ".join(self.config.peers), self.client.url,
                 os.getpid())
        try:
            self.loop()
        finally:
            if push is not None:
                push.stop()
            try:
                self.upkeep.finish()
            except Exception as exc:  # best effort: the senders' resends make up for it
                self.record_error(exc)
            self.status.push = "off"
            self.status.save(self.folder)
            log.info("stopped")

    def loop(self) -> None:
        """Fetch when woken or when the poll interval (or a backoff) is over; between fetches,
        tick the upkeep every UPKEEP_TICK_S so delivered receipts leave promptly."""
        failures = 0
        next_drain = 0.0
        while not self.stopping:
            if self.reload:
                self.reload = False
                self.config = FollowConfig.load(self.folder)
                self.status.peers = list(self.config.peers)
            if self.wake.is_set() or time.monotonic() >= next_drain:
                self.wake.clear()
                try:
                    self.drain()
                    failures, next_drain = 0, time.monotonic() + self.config.interval
                except Exception as exc:  # never exit: record, back off, retry
                    failures += 1
                    next_drain = time.monotonic() + delay(failures)
                    self.record_error(exc)
                self.status.save(self.folder)
            if not failures:
                try:
                    self.upkeep.run()
                except Exception as exc:  # the same: record it and try again next tick
                    self.record_error(exc)
            self.wake.wait(min(UPKEEP_TICK_S, max(0.0, next_drain - time.monotonic())))

    def record_error(self, exc: Exception) -> None:
        if isinstance(exc, TalkError):
            log.warning("%s", exc)
        else:
            log.exception("unexpected error")
        self.status.last_error = str(exc) or type(exc).__name__
        self.status.last_error_at = time.time()
