"""The receiver's side of messages with files: park them as they come, take their files after.

A message that announces files or a long body is judged like any other; where another would be
handed on (or held), it is parked instead (`follower.files.parked`), with its spool line and its
files' keys, and acked at the relay as mail. Its files are taken later and elsewhere
(`follower.files.taker`: the follower's own thread, or `talk receive` once the mail is in), so
other mail flows meanwhile, and the message reaches the agent only once its files are complete;
its sender's later mail is parked behind it, without files, so it cannot overtake it
(`follower.receive.ordering`).
`file_taker` builds that taker with this package's quarantine and receipts.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from follower.files.parked import Parked
from follower.files.taker import Deliver, FileTaker
from follower.receive.quarantine import Quarantine
from follower.receive.receipts import ReceiptBatch
from follower.relay.client import RelayClient
from keys.contacts import ContactBook
from keys.envelope import Inner
from keys.fileref import body_of, files_of
from keys.identity import Identity

__all__ = ["announces_files", "file_ids", "file_taker", "park"]


def announces_files(inner: Inner) -> bool:
    """(`follower.receive.inbound` asks this inline: it imports this module only to park.)"""
    return "files" in inner.extra or "body" in inner.extra


def file_ids(inner: Inner) -> list[str]:
    """The relay ids of the files (and body) `inner` announces (the gate checked them)."""
    body = body_of(inner.extra)
    return [ref.id for ref in [*files_of(inner.extra), *([body] if body is not None else [])]]


def park(folder: Path, sender: str, inner: Inner, record: dict[str, Any], hold: str | None,
         answer: bool) -> None:
    """Keep `inner`'s spool line and files until they are in (durable when this returns).

    Raises:
        Invalid: the files field is out of its shape (the gate passed it: never, in practice).
        OSError, LocalFileRefused: the record cannot be written.
    """
    Parked(folder).park(record, sender, files_of(inner.extra), body_of(inner.extra), hold, answer)


def file_taker(identity: Identity, folder: Path, client: RelayClient, contacts: ContactBook,
               deliver: Deliver, handed_state: str) -> FileTaker:
    """The taker of this identity's parked messages, refusing into the quarantine and telling
    senders by receipts sent at once."""

    def keep(msg_id: str, sender: str, file_ids: list[str], reason: str) -> None:
        Quarantine(folder).keep(",".join(file_ids), "files", b"", reason, sender, msg_id)

    def tell(sender: str, msg_id: str, state: str, reason: str) -> None:
        contact = contacts.by_fingerprint(sender)
        if contact is not None:
            batch = ReceiptBatch()
            batch.add(contact, msg_id, state, reason)
            batch.flush(identity, client)  # best effort: a failure is logged, as every receipt's

    return FileTaker(identity, folder, client, deliver, handed_state, keep, tell)
