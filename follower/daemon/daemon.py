"""The follower: fetch → open → spool (durable) → ack, woken by push, polling as a safety net;
the files messages announce come on a thread of their own (`follower.daemon.files`).

Small mail comes with its push (`follower.relay.push.PushedMail`) and is opened without a fetch,
on the push thread itself when the loop is idle (`Follower.take_pushed`; the two take turns);
the fetch that acks it asks for whatever else waits.

It never exits on a network or relay error: it records the error for `talk status`, backs
off with jitter and tries again. A crash anywhere leaves unacked mail on the relay; the spool
drops the copy it already has by message id.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from types import FrameType
from typing import Any, Protocol, cast

from durable.errors import TalkError
from durable.files import sweep_temp_files
from follower.daemon.files import FileThread
from follower.daemon.state import FollowConfig, FollowStatus, StatusFile, following
from follower.daemon.upkeep import Upkeep, follower_delay
from follower.receive.channeldb import ChannelDB, SpoolDedup, receiving
from follower.receive.inbound import LINGER_S, Dedup, Receiver
from follower.receive.receipts import ReceiptBatch
from follower.relay.backoff import RETRY
from follower.relay.client import RelayClient
from follower.relay.push import PushedMail, PushListener
from keys.contacts import Contact, ContactBook
from keys.identity import Identity
from spool_writer.doorbell import Doorbell, bell_path
from spool_writer.record import SpoolRecord
from spool_writer.spool import Spool

__all__ = ["Follower"]

log = logging.getLogger("talk.follower")
# Resends, held-mail expiry and a look at the hand-over log, when nothing rang sooner: an idle
# follower wakes once a second at most. A door that hands mail over rings the doorbell, so
# `delivered` receipts still leave at once.
UPKEEP_EVERY_S = 1.0


class Followed(Protocol):
    """What the daemon needs of the identity it follows (`follower.account.Account` has it):
    named here so the daemon does not import the API that sits above it."""

    @property
    def folder(self) -> Path: ...

    relay: str

    @property
    def client(self) -> RelayClient: ...

    @property
    def contacts(self) -> ContactBook: ...

    def identity(self) -> Identity: ...

    def receiver(self, seen: Dedup | None = None, *, handed_state: str = ..., batch_acks: bool = ...,
                 linger_s: float = ..., page: Callable[[], AbstractContextManager[None]] | None = None,
                 receipts: ReceiptBatch | None = None) -> Receiver: ...


class DrainAsked:
    """Set by whatever wants the loop to fetch now (a push frame, a signal, the doorbell); the
    loop's own `wake` alone only has it look at its clock again."""

    def __init__(self, wake: threading.Event) -> None:
        self._wake = wake
        self._asked = False

    def set(self) -> None:
        self._asked = True  # before the wake: the loop clears the wake, then takes this
        self._wake.set()

    def take(self) -> bool:
        asked, self._asked = self._asked, False
        return asked


class Follower:
    """The daemon of one account; its relay client should be long-lived (`Account.sessions`:
    one signed request opens an owner session, later fetches are MACed)."""

    def __init__(self, account: Followed) -> None:
        self.identity = identity = account.identity()
        self.folder = folder = account.folder
        relay = account.relay
        self.client = account.client
        self.contacts = account.contacts
        self.spool = Spool(folder / "spool")
        # Receipts wait a random pause after the fetch that caused them; the upkeep sends them.
        receipts = ReceiptBatch(delay=follower_delay())
        self.store = ChannelDB(folder)
        self.receiver = account.receiver(SpoolDedup(self.store, self.spool.knows), batch_acks=True,
                                         linger_s=LINGER_S, handed_state="spooled", receipts=receipts,
                                         page=self.page)
        self.upkeep = Upkeep(identity, folder, self.client, receipts)
        self.files = FileThread(identity, folder, relay, self.count_delivered, self.record_error)
        self.receiver.on_park = self.files.wake.set
        self.wake = threading.Event()  # the loop looks at its clock and its flags again
        self.asked = DrainAsked(self.wake)
        # One thread at a time uses the receiver, the stores and the relay client: the loop, or
        # the push thread taking the mail it was pushed (`take_pushed`).
        self.turn = threading.Lock()
        self.pushed = PushedMail()
        self.upkeep_due = True
        self.stopping = False
        self.failures = 0  # drains failed in a row: the loop backs off, the push thread waits for it
        self.reload = True
        self.config = FollowConfig()
        self.status = FollowStatus(pid=os.getpid(), relay=relay, since=time.time())
        self.status_file = StatusFile(folder)  # the push thread saves the status too
        self.counting = threading.Lock()

    @contextlib.contextmanager
    def page(self) -> Iterator[None]:
        """One fetched page, made durable once before it is acked: the spool's lines are synced,
        then its index, then the store commits the ids (a power cut cannot leave an id taken
        whose line is lost; a kill, at worst, shows the page to the dedup again)."""
        with self.store.page(), self.spool.batch():
            yield

    def deliver(self, record: dict[str, Any]) -> None:
        # Built by `follower.receive.spool_line` with every field SpoolRecord requires;
        # Spool.deliver checks again.
        if self.spool.deliver(cast(SpoolRecord, record)):
            self.count_delivered()

    def count_delivered(self) -> None:
        with self.counting:  # from the file thread too, while a drain counts its own
            self.status.delivered += 1

    def peers(self) -> list[Contact] | None:
        """The contacts to take mail from; None: every contact, as the contact book holds them now."""
        if self.config.every:
            return None
        chosen = []
        for name in self.config.peers:
            try:
                chosen.append(self.contacts.get(name))
            except TalkError as exc:
                log.warning("skipping peer %s: %s", name, exc)
        return chosen

    def drain(self) -> None:
        with receiving(self.folder):  # a `talk receive` started meanwhile waits, then sees what we took
            report = self.receiver.receive(self.deliver, self.peers(), pushed=self.pushed.take())
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
        self.asked.set()

    def set_push(self, state: str) -> None:
        """A lost push stream shows in `talk status` at once, not at the next fetch."""
        self.status.push = state
        self.save_status()

    def on_ring(self) -> None:
        self.upkeep_due = True
        self.asked.set()

    def take_pushed(self) -> bool:
        """On the push thread, just after a message came with its push: take it at once when the
        loop is idle (True), sparing the hand-over to the loop's thread (a tenth of a millisecond
        of a live message's way on a small machine). False leaves it to the loop: busy, stopping,
        backing off after a failed drain, or this drain failed (the loop's drain meets the fault
        again, and records it). Receipts it queued may be due before the loop's next look at its
        clock: the loop is woken to plan again, not to fetch."""
        if self.stopping or self.failures or not self.turn.acquire(blocking=False):
            return False
        try:
            self.drain()
        except Exception as exc:
            log.info("pushed mail left to the loop: %s", exc)
            return False
        finally:
            self.turn.release()
        self.save_status()
        if self.upkeep.receipts.next_due() is not None:
            self.wake.set()
        return True

    def save_status(self, final: bool = False) -> None:
        """Write the status when it changed (`FollowStatus.due`; `final`: whatever changed).
        Never fatal: a full disk or a lost folder must not stop the follower (nothing is acked
        that is not on disk, so mail waits on the relay); the error is logged and kept in memory,
        and saved with the status once there is room."""
        if self.client.republished_at is not None:
            self.status.republished_at = self.client.republished_at
        try:
            self.status_file.save(self.status, final)
        except OSError as exc:
            log.warning("cannot save the follower's status: %s", exc)

    def run(self) -> None:
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGUSR1):
            signal.signal(sig, self.on_signal)
        self.config = FollowConfig.load(self.folder)
        push = None
        if self.config.push:
            push = PushListener(self.client.url, self.identity, self.asked, self.set_push, self.pushed,
                                take=self.take_pushed)
            push.start()
        try:
            self.spool.layout.ensure()
            for leftover in (self.folder, self.spool.layout.root):
                sweep_temp_files(leftover)  # from a writer killed mid-write, a full disk…
            # Only in a spool folder that passed its checks: never a pipe in someone else's.
            Doorbell(bell_path(self.spool.layout.handed), self.on_ring).start()
        except (OSError, TalkError) as exc:  # the drain meets it again and keeps it in the status
            self.record_error(exc)
        log.info("following %s on %s (pid %d)", following(self.config.peers, self.config.every),
                 self.client.url, os.getpid())
        self.files.start()
        try:
            self.loop()
        finally:
            self.files.stop()
            if push is not None:
                push.stop()
            try:
                with self.turn:  # after the push thread's last drain, if it was in one
                    self.upkeep.finish()
            except Exception as exc:  # best effort: the senders' resends make up for it
                self.record_error(exc)
            self.status.push = "off"
            self.save_status(final=True)
            log.info("stopped")

    def loop(self) -> None:
        """Fetch when woken (push) or when the poll interval (or a backoff) is over; run the
        upkeep when the doorbell rang, or once every UPKEEP_EVERY_S."""
        self.failures = 0
        next_drain = 0.0
        next_upkeep = 0.0
        while not self.stopping:
            if self.reload:
                self.reload = False
                self.config = FollowConfig.load(self.folder)
                self.status.peers, self.status.every = list(self.config.peers), self.config.every
            self.wake.clear()
            if self.asked.take() or time.monotonic() >= next_drain:
                try:
                    with self.turn:
                        self.drain()
                    self.failures, next_drain = 0, time.monotonic() + self.config.interval
                except Exception as exc:  # never exit: record, back off, retry
                    self.failures += 1
                    next_drain = time.monotonic() + RETRY.delay(self.failures)
                    self.record_error(exc)
                self.save_status()
            if not self.failures and (self.upkeep_due or time.monotonic() >= next_upkeep):
                self.upkeep_due = False
                next_upkeep = time.monotonic() + UPKEEP_EVERY_S
                try:
                    self.run_upkeep()
                except Exception as exc:  # the same: record it at once and try again later
                    self.record_error(exc)
                self.save_status()  # a heartbeat held back by the last drain, if any
            soonest = min(next_drain, next_upkeep) if not self.failures else next_drain
            receipts_due = self.upkeep.receipts.next_due()
            if receipts_due is not None and not self.failures and receipts_due < soonest:
                soonest, next_upkeep = receipts_due, receipts_due  # a paused receipt is due
            self.wake.wait(max(0.0, soonest - time.monotonic()))

    def run_upkeep(self) -> None:
        """The upkeep in the follower's turn, then the receipts it took sealed and deposited
        outside it: the push thread takes new mail meanwhile."""
        try:
            with self.turn:
                self.upkeep.run()
        finally:
            self.upkeep.send_due()

    def record_error(self, exc: Exception) -> None:
        if isinstance(exc, TalkError):
            log.warning("%s", exc)
        else:
            log.exception("unexpected error")
        self.status.last_error = str(exc) or type(exc).__name__
        self.status.last_error_at = time.time()
