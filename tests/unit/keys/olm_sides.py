"""Two identities' Olm accounts and sessions on disk, and the receive steps run by hand, for the
tests of `keys.ratchet.sessions` and `keys.ratchet.late`: each `store()` reads the files
again, as a new process would."""

from __future__ import annotations

from pathlib import Path

import vodozemac

from durable.errors import TamperedMessage
from keys.identity import Identity
from keys.ratchet.account import RatchetAccount, card_for, unpublished_keys
from keys.ratchet.card import Claim
from keys.ratchet.sessions import Opened, RatchetSessions


class Side:
    """One identity's account and sessions, read from disk again by every `store()`."""

    def __init__(self, folder: Path, identity: Identity) -> None:
        folder.mkdir(mode=0o700)
        self.folder, self.identity, self.fp = folder, identity, identity.fingerprint

    def store(self) -> RatchetSessions:
        return RatchetSessions(RatchetAccount(self.folder, self.identity))

    def claim(self) -> Claim:
        """What a peer's claim would hand out: our card and one fresh one-time key."""
        with RatchetAccount(self.folder, self.identity).changing() as account:
            account.generate_one_time_keys(1)
            _, (key,) = unpublished_keys(account, self.identity)
            account.mark_keys_as_published()
        return Claim(card_for(account, self.identity), key)

    def curve(self) -> bytes:
        return RatchetAccount(self.folder, self.identity).read().curve25519_key.to_bytes()


Received = list[tuple[Side, str, vodozemac.AnyOlmMessage]]  # a page: each message with its sender and id


def receive(me: Side, sender: Side, msg_id: str, message: vodozemac.AnyOlmMessage,
            handed: dict[str, bytes], stop_after: int = 5) -> bool:
    """The receive steps 1-4 for a page of one message (the relay's ack is step 5), stopped
    after step `stop_after` as a kill would stop them. `handed` drops a second hand-over of one
    id, as the spool does. Returns whether the message would be acked."""
    return receive_page(me, [(sender, msg_id, message)], handed, stop_after) == [msg_id]


def receive_page(me: Side, page: Received,
                 handed: dict[str, bytes], stop_after: int = 5) -> list[str]:
    """The receive steps for a page of messages, each refused one skipped as the follower
    quarantines it; the ids that would be acked (all of them, refused ones too, or none)."""
    with me.store().page() as opening:
        opened = {}
        for sender, msg_id, message in page:
            try:
                opened[msg_id] = opening.open(sender.fp, sender.curve(), msg_id, message)
            except TamperedMessage:
                continue
        if stop_after < 3:
            return []
        for msg_id, one in opened.items():
            if not one.duplicate:
                handed.setdefault(msg_id, one.plaintext)
        if stop_after < 4:
            return []
        opening.commit()
    return [msg_id for _, msg_id, _ in page] if stop_after >= 5 else []


def opens(me: Side, sender: Side, msg_id: str, message: vodozemac.AnyOlmMessage) -> Opened:
    """Open one message in a page of its own, committing nothing."""
    with me.store().page() as opening:
        return opening.open(sender.fp, sender.curve(), msg_id, message)
