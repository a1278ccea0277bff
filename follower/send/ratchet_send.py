"""Sealing mail to a contact inside its Olm session, when the contact offers one.

A contact offers one when the relay serves its ratchet card and a key signed by the pinned
signing key (`follower.send.ratchet_keys.claim_ratchet_key`). The first message claims a key once
and starts an outbound session; later messages ride the session (`keys.ratchet.sessions`),
and the Olm message travels inside today's sealed envelope (`keys.ratchet.envelope`).

A contact that offers none (an identity made before ratchet keys, or with them turned off;
a relay without the key directory) gets today's envelope, without forward secrecy; the
answer is remembered for `RECHECK_S`, so such a contact costs a claim round trip once an hour,
not on every send. A relay that cannot be reached for the claim also gets today's envelope
(the message is queued as today's are); a card that the pinned key did not sign is a PIN
MISMATCH and nothing is sent.

`TALK_RATCHET=off` in the environment turns ratchet keys off for the process: nothing is
published (`talk init`, the follower) and nothing is sealed in a session, as before they
existed; mail that arrives in a session still opens.
"""

from __future__ import annotations

import functools
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from durable.errors import NotFound, PinMismatch, RelayError
from durable.files import ensure_private_dir, read_json, write_json
from follower.relay.client import RelayClient
from keys.contacts import Contact
from keys.envelope import MAX_PADDED, Inner
from keys.identity import Identity
from keys.ratchet.account import RatchetAccount
from keys.ratchet.card import Claim, RatchetCard, RatchetKeyError, verify_card
from keys.ratchet.envelope import plaintext_of, wrap
from keys.ratchet.sessions import SESSIONS_DIR, RatchetSessions, has_sessions, session_card

if TYPE_CHECKING:
    from keys.ratchet.inflight import Inflight, Keeping

__all__ = ["RATCHET_ENV", "RECHECK_S", "SessionMessage", "forward_secret", "ratchet_enabled", "ratchet_inner",
           "vouched_card"]

RATCHET_ENV = "TALK_RATCHET"
RECHECK_S = 3600.0
NO_CARD = ".nocard"
# Room for the Olm header and MAC, the card and the envelope's own fields, after base64.
MAX_RATCHET_PLAIN = (MAX_PADDED - 1 - 1024) * 3 // 4


def ratchet_enabled() -> bool:
    return os.environ.get(RATCHET_ENV, "").strip().lower() != "off"


def forward_secret(folder: Path, fp: str) -> bool:
    """Whether mail to `fp` rides an Olm session (one was started or received, and not lost
    since), as `talk contacts` shows it; read without opening a pickle."""
    return has_sessions(folder, fp)


def vouched_card(folder: Path, contact: Contact) -> RatchetCard | None:
    """The ratchet card (Olm identity keys) `contact`'s session rides on, checked again against
    the pinned signing key; None: no session yet, so no forward secrecy yet.

    Raises:
        PinMismatch: the stored card is not one the pinned key signed.
    """
    stored = session_card(folder, contact.fingerprint)
    if stored is None:
        return None
    try:
        return verify_card(stored, contact.fingerprint, contact.sign_key)
    except RatchetKeyError as exc:
        raise PinMismatch(
            f"PIN MISMATCH for {contact.name}: the ratchet card its session was started with is not "
            f"signed by the pinned key ({exc}); move {folder / SESSIONS_DIR / contact.fingerprint}.json "
            "aside so the next message starts a new session, and check the fingerprint with your peer"
        ) from exc


class SessionMessage(NamedTuple):
    """A message sealed in an Olm session: the envelope that carries it, and (for a message the
    outbox records) its copy to keep until it settles, to call while the relay stores it and
    again before the send returns (`keys.ratchet.inflight.Keeping`)."""

    envelope: Inner
    keep: Keeping | None


class _TooLong(Exception):
    """The form of a message its peer reads does not fit a session message."""


def ratchet_inner(identity: Identity, client: RelayClient, contact: Contact, home: Path,
                  inner: Inner, recorded: bool = False) -> SessionMessage | None:
    """`inner` as an Olm message in the session with `contact` (started from a claimed key if
    there is none yet), wrapped for the sealed envelope; None: send today's envelope. A message
    the outbox records (`recorded`) also keeps what it said until it settles
    (`keys.ratchet.inflight`), so that if the contact refuses it for a reason sending again
    cures (a lost session, a reused number) it can be sealed anew.

    Raises:
        PinMismatch: the relay served ratchet keys the pinned key did not sign.
        UserError: the stored sessions or account cannot be opened.
    """
    if not ratchet_enabled():
        return None
    made: dict[bool, bytes] = {}

    def form(short: bool) -> bytes:
        """The plaintext the session encrypts, made once (the short form only for a peer that
        reads it)."""
        data = made.get(short)
        if data is None:
            data = plaintext_of(inner, short)
            if len(data) > MAX_RATCHET_PLAIN:
                # The Olm body travels base64 in the inner JSON, so a session message holds about
                # three quarters of what today's envelope does. A longer message (up to talk's
                # limit, which must not shrink under the people and agents who rely on it) goes
                # in today's envelope, sealed to the long-term key: the README says so. Only the
                # sender picks this; a relay cannot, since it sees only the padded size.
                raise _TooLong
            made[short] = data
        return data

    full, short = functools.partial(form, False), functools.partial(form, True)
    store, inflight = _sender(home, identity)
    try:
        try:
            message = store.encrypt(contact.fingerprint, full, short)
        except NotFound:
            full()  # a new session's peer reads the whole form: too long, and no key is claimed for it
            claim = _claim(client, contact, store.folder)
            if claim is None:
                return None
            store.start(contact.fingerprint, claim)
            message = store.encrypt(contact.fingerprint, full, short)
    except _TooLong:
        return None
    # Until the peer answers in the session, every message is a pre-key message: each carries
    # the card, so whichever of them arrives first can start the peer's side. The peer's
    # receipts answer soon (`keys.ratchet.envelope`); the card is read without unsealing the account.
    card = store.account.card().to_json() if message.to_pre_key() is not None else None
    # The copy keeps the whole inner envelope, whichever form went: a message sent again goes in a
    # new session, whose peer has not said yet that it reads the short form.
    keep = None
    if recorded:
        from keys.ratchet.inflight import Keeping

        keep = Keeping(inflight, inner, lambda: made.get(False) or plaintext_of(inner))
    return SessionMessage(wrap(inner, message, card), keep)


# The session store and in-flight log of each identity this process sends as: built once, not
# on every message.
_SENDERS: dict[tuple[Path, bytes], tuple[RatchetSessions, Inflight]] = {}


def _sender(home: Path, identity: Identity) -> tuple[RatchetSessions, Inflight]:
    key = (home, identity.secret_bytes())
    sender = _SENDERS.get(key)
    if sender is None:
        from keys.ratchet.inflight import Inflight  # a receive that only answers never sends one

        sender = _SENDERS[key] = (RatchetSessions(RatchetAccount(home, identity)), Inflight(home, identity))
    return sender


def _claim(client: RelayClient, contact: Contact, folder: Path) -> Claim | None:
    from follower.send.ratchet_keys import claim_ratchet_key  # a first message's cost only

    marker = folder / f"{contact.fingerprint}{NO_CARD}"
    checked = read_json(marker, None)
    now = time.time()
    if isinstance(checked, dict) and now - float(checked.get("at", 0)) < RECHECK_S:
        return None
    try:
        return claim_ratchet_key(client, contact)
    except RelayError as exc:
        if exc.status == 404:  # no card for it here, or no key directory on this relay
            ensure_private_dir(folder, "ratchet sessions folder")
            write_json(marker, {"at": now})
        return None
