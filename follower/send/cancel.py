"""Cancelling a file transfer whose message has not gone: `talk outbox --cancel ID`.

Under the transfer's lock, so never while an upload runs (`talk send --file` or the follower
hold it while they upload): then the cancel is refused, not waited for. The record goes, and
with it each file's key and a long text's body; the message is never sent. The chunks already
uploaded stay on the relay, sealed under the erased keys, until its TTL: only the recipient
(the mailbox's owner) can delete them there, and no one can open them now.

A message that went (the outbox holds it) cannot be called back.
"""

from __future__ import annotations

from collections.abc import Iterable

from durable.errors import UserError
from durable.locks import locked
from durable.message_ids import resolve, short
from follower.send.transfer import Transfer, TransferBook

__all__ = ["cancel"]

HINT = "`talk outbox` lists them"


def _already_sent(msg_id: str) -> UserError:
    return UserError(f"message {short(msg_id)} already went to the relay; a sent message cannot be "
                     "cancelled (`talk status` shows how far it got)")


def cancel(book: TransferBook, sent: Iterable[str], typed: str) -> Transfer:
    """Erase the unfinished transfer `typed` names (its id, or 6+ of its first characters) and
    return it as it was. `sent` are the ids of the messages the outbox holds.

    Raises:
        NotFound: no transfer or sent message has that id.
        UserError: not an id, ambiguous, the message already went, or an upload holds it now.
    """
    sent = set(sent)
    transfer_id = resolve(typed, {t.id for t in book.pending()} | sent, "transfer or sent message", HINT)
    if transfer_id in sent:
        raise _already_sent(transfer_id)
    try:
        with locked(book.lock_path(transfer_id), wait=False):
            transfer = book.get(transfer_id)
            if transfer is None:  # finished while this looked: its message went
                raise _already_sent(transfer_id)
            book.finish(transfer_id)
            return transfer
    except BlockingIOError:
        raise UserError(f"transfer {short(transfer_id)} is uploading now; stop that command (or the "
                        "follower: talk stop) first, then cancel it") from None
