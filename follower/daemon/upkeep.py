"""The follower's side jobs between fetches: delivered receipts, held mail expiry, resends,
keeping our ratchet keys on the relay (`follower.send.ratchet_keys`), and finishing the file
uploads of commands that died (`follower.daemon.uploads`).

Each is at-least-once: a receipt is sent before the offset that produced it is saved, a held
message leaves the box only after its sender was told, a resend is logged before it goes.

The receipts a fetch produces, expiry notices and resends wait a random pause
(`follower.relay.backoff.deposit_delay`) from the moment they became due, so their timing does not
point at the fetch that caused them (a peer's receipts queued meanwhile go with the first
that is due). `delivered` receipts do not: an alarm's hand-over, not a fetch, sets their time.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

from durable.errors import TalkError
from durable.files import read_json, write_json
from durable.ndjson import read_after
from durable.settings import env_float
from follower.daemon.uploads import Uploads
from follower.held import HeldBox
from follower.policy import HOLD_HOURS
from follower.receive.receipts import Due, ReceiptBatch, deposit, seal_all
from follower.relay.backoff import DEPOSIT_DELAY_ENV, deposit_delay
from follower.relay.client import RelayClient
from follower.send.outbound import resend_due, send_queued
from follower.send.outbox import RESEND_AFTER_S, Outbox
from follower.send.ratchet_keys import publish_ratchet_keys
from follower.send.ratchet_send import ratchet_enabled
from keys.contacts import ContactBook
from keys.identity import Identity
from keys.ratchet.account import RatchetAccount
from keys.ratchet.inflight import Inflight
from spool_writer import handed
from spool_writer.layout import SpoolLayout

OFFSET_FILE = "handed.offset"
RATCHET_EVERY_S = 300.0  # how often the relay is asked how many of our one-time keys are left
log = logging.getLogger("talk.follower")


def follower_delay() -> Callable[[], float]:
    """The random pause before each of the follower's own deposits (TALK_DEPOSIT_JITTER)."""
    return partial(deposit_delay, os.environ.get(DEPOSIT_DELAY_ENV))


class Upkeep:
    """`receipts`: the batch the follower's Receiver queues its receipts in; taken by `run` when
    due (with the session answers they owe), sealed and deposited by `send_due`, which may run
    while the push thread takes new mail: neither a receipt's sealing nor its round trip to the
    relay holds up the next message (the round trip did for one in thirty on a busy stream, by
    ~1 ms; the sealing for one in a hundred, by 0.7 to 1 ms). `send_due` has a connection of its
    own for that."""

    def __init__(self, identity: Identity, folder: Path, client: RelayClient,
                 receipts: ReceiptBatch | None = None) -> None:
        self.identity = identity
        self.folder = folder
        self.client = client
        self.receipts = receipts if receipts is not None else ReceiptBatch()
        self.due: list[Due] = []  # receipts taken when due, not yet sealed and deposited
        self.sender = RelayClient(client.url)
        self.delay = self.receipts.delay or follower_delay()
        self.contacts = ContactBook(folder)
        self.log = SpoolLayout(folder / "spool").handed
        self.hold_hours = env_float("TALK_HOLD_HOURS", HOLD_HOURS)
        self.resend_after = env_float("TALK_RESEND_AFTER", RESEND_AFTER_S)
        self.slow_every = min(5.0, self.resend_after)  # the outbox is folded at most this often
        self.next_slow = time.monotonic() + self.delay()
        self.ratchet = RatchetAccount(folder, identity)
        self.ratchet_every = env_float("TALK_RATCHET_EVERY", RATCHET_EVERY_S)
        self.next_ratchet = 0.0  # at the first run: a follower start publishes
        self.fresh_fallback = True
        self.uploads = Uploads(identity, folder, client.url)
        self.bundle_published = False
        # Read once; this process is the only one that moves it (one follower per identity).
        saved = read_json(self.folder / OFFSET_FILE, {})
        self.offset = int(saved.get("offset", 0)) if isinstance(saved, dict) else 0

    def report_delivered(self) -> int:
        """`written` and `delivered` receipts for what doors handed to agents since last time."""
        items, end = read_after(self.log, self.offset)
        if end == self.offset:
            return 0
        # No pause here: a hand-over is timed by the agent's host (the door rang the doorbell),
        # not by a fetch, so sending at once tells the relay nothing about our fetches; and a
        # sender waiting for `delivered` hears of it in milliseconds, not seconds.
        batch = ReceiptBatch()
        told: set[tuple[str, str]] = set()
        for item in items:
            contact = self.contacts.by_fingerprint(str(item.get("from")))
            msg_id, state = str(item.get("id")), handed.state_of(item)
            if contact is not None and (msg_id, state) not in told:
                told.add((msg_id, state))
                batch.add(contact, msg_id, state.value)
        if batch.flush(self.identity, self.client):
            return 0  # not told: read these lines again next time
        self.offset = handed.empty_if_read(self.log, end)
        write_json(self.folder / OFFSET_FILE, {"offset": self.offset})
        return len(told)

    def expire_held(self, now: float) -> int:
        box = HeldBox(self.folder)
        gone = box.expired(now, self.hold_hours)
        if not gone:
            return 0
        held = box.entries(gone)
        gone = list(held)
        batch = ReceiptBatch()
        for msg_id in gone:
            contact = self.contacts.by_fingerprint(str(held[msg_id]["record"].get("from")))
            if contact is not None:
                batch.add(contact, msg_id, "expired", f"held for {self.hold_hours:g} h and not released")
        if batch.flush(self.identity, self.client):
            return 0
        box.remove(gone)
        return len(gone)

    def resend(self, now: float) -> int:
        outbox = Outbox(self.folder)
        return send_queued(self.client, outbox) + resend_due(self.client, outbox, now, self.resend_after)

    def refresh_ratchet(self) -> int | None:
        """Top up our ratchet keys on the relay, with a fresh fallback key on this follower's
        first run; how many one-time keys wait there (None: not published, or turned off by
        TALK_RATCHET=off). A failure is logged, not raised: peers then write without forward
        secrecy, which must not show as the follower's error (nor on a relay that has no key
        directory)."""
        if not self.bundle_published:  # once a run: with the KEM key an upgrade added
            try:
                self.client.publish(self.identity.bundle())
                self.bundle_published = True
            except (TalkError, OSError) as exc:
                log.info("keys not published: %s", exc)
        if not ratchet_enabled():
            return None
        try:
            left = publish_ratchet_keys(self.client, self.ratchet, self.identity,
                                        new_fallback=self.fresh_fallback)
        except (TalkError, OSError) as exc:  # OSError: the account's file (a full disk, say)
            log.info("ratchet keys not published: %s", exc)
            return None
        self.fresh_fallback = False
        return left

    def run(self, now: float | None = None) -> None:
        """Queued and delivered receipts every tick (an agent's sender may be waiting); the
        rest less often, at a random point of each round."""
        now = time.time() if now is None else now
        self.due += self.receipts.take_due()
        self.report_delivered()
        if time.monotonic() >= self.next_slow:
            self.next_slow = time.monotonic() + self.slow_every + self.delay()
            self.expire_held(now)
            self.resend(now)
            self.uploads.run(now)
            Inflight(self.folder, self.identity).sweep()  # erase what can no longer be sent again
        if time.monotonic() >= self.next_ratchet:
            self.next_ratchet = time.monotonic() + self.ratchet_every
            self.refresh_ratchet()

    def send_due(self) -> None:
        """Seal and deposit the receipts `run` took; a failure is logged (their senders' resends
        make up for it). Uses no session or store: call it outside the follower's turn."""
        due, self.due = self.due, []
        if due:
            deposit(self.sender, seal_all(self.identity, due))

    def finish(self) -> None:
        """On the way out: what is still queued goes now, rather than never."""
        self.due += self.receipts.take_due(everything=True)
        self.send_due()
        self.sender.close()
