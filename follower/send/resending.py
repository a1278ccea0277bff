"""Whether a refused message is sent again, how, and when it is final (pure: no I/O).

A receiver refuses a message of ours that it could not take through no fault of the message:

    NO_SESSION  it holds no session with us that opens it (it lost its state): forget ours and
                send it in a new session.
    UNOPENED    it holds a session with us, but the message opened in none (late beyond what it
                keeps, or a state rolled back on either side): send it again in the current
                session; if a copy already sent again so is refused the same way, the session
                is what fails: forget it and send in a new one.
    REPLAY      it opened, but its number was used before (our count was rolled back: a restored
                backup); the refusal says the highest number seen from us. Move our count past
                it (`follower.send.seqcounter.move_past`) and send it again under a fresh number.

Each is sent again under its own id. The receiver hands a message on once per id, whatever
copies come (its id dedup); none of these refusals handed it on, and each left the id free to
come again: the first two fail before the message opens, and a replay, opened, is refused
before it is recorded, and the Olm layer lets the id go (`keys.ratchet.sessions.Page.let_go`:
the quarantine keeps the record). So a copy sent again is taken once, whichever copies arrive.
A new id instead would need a link kept on both sides to tell the copies apart, and a kill
between making the new id and recording the link would send the message twice; the same id
needs none.

A kill of the sender while it takes the refusing receipt (`follower.receive.inbound.Receiver.take_receipt`)
leaves the receipt on the relay, and it is taken again. Before a copy is recorded in the outbox
(the refusal recorded, the count moved, the session forgotten, the copy perhaps sealed: an Olm
step and a number used up, which the receiver sees as one message missing), taking it again
does the same once more: moving the count and recording a refusal are idempotent, and one more
sealing is one more copy of the same id. Once the copy is recorded, the entry names the receipt
that brought it back (`answered`): taken again, that receipt's refusal is not acted on twice,
and the recorded copy is deposited again (the same blob: a duplicate at worst). No point loses
the message, and no point makes the receiver hand it on twice.

Bounded: a message is sent at most `MAX_SENDS` times in all. Past that its refusal is final,
and says so ("refused after 4 attempts: ..."), as does any refusal no rule brings back.
"""

from __future__ import annotations

import copy
from enum import StrEnum

from follower.send.outbox import REFUSALS, Entry, advance

__all__ = ["Cause", "final_reason", "never_reached", "resends"]

MAX_SENDS = 4


class Cause(StrEnum):
    NO_SESSION = "no session"
    UNOPENED = "not opened"
    REPLAY = "replay"
    OTHER = "other"  # a refusal for the message's own sake (policy, the gate): final at once


class Way(StrEnum):
    """How a copy was sent again (the outbox keeps the last, `follower.send.outbox.Entry.way`)."""

    SAME_SESSION = "same session"
    NEW_SESSION = "new session"
    RENUMBERED = "renumbered"


def next_way(cause: Cause, sends: int, last: str) -> Way | None:
    """How to send again a message sent `sends` times so far, the last copy sent again in the
    way `last` ("" for the first), that a receiver refused for `cause`; None: it stays refused."""
    if cause is Cause.OTHER or sends >= MAX_SENDS:
        return None
    if cause is Cause.NO_SESSION:
        return Way.NEW_SESSION
    if cause is Cause.UNOPENED:
        return Way.NEW_SESSION if last == Way.SAME_SESSION else Way.SAME_SESSION
    return Way.RENUMBERED


def final_reason(sends: int, reason: str) -> str:
    """What the outbox says of a refusal that is final, after `sends` copies."""
    return f"refused after {sends} attempts: {reason}" if sends > 1 else reason


def resent_reason(way: Way, sends: int) -> str:
    """What the outbox says of a message on its way again."""
    how = {Way.SAME_SESSION: "in the same session", Way.NEW_SESSION: "in a new session",
           Way.RENUMBERED: "under a fresh number"}[way]
    return f"refused, sent again {how} (attempt {sends} of {MAX_SENDS})"


def cause_of(reason: str, highest: int | None) -> Cause:
    """Why a receiver refused a message of ours, as `follower.send.resending` tells causes apart: a
    refusal that names the highest number seen from us is one of a reused number."""
    if highest is not None:
        return Cause.REPLAY
    if reason.startswith(Cause.NO_SESSION):
        return Cause.NO_SESSION
    if reason.startswith(Cause.UNOPENED):
        return Cause.UNOPENED
    return Cause.OTHER


def resends(mine: dict[str, Entry], items: list[tuple[str, str, str]], highest: dict[str, int],
            unreached: set[str]) -> tuple[bool, dict[str, Way]]:
    """(whether to forget our sessions with the receiver first, {id: how to send it again}) for a
    receipt's `items` (`highest`: of the refusals of reused numbers; `unreached`: those
    `never_reached` lets come back).
    One forget serves every message brought back: all of them then go in the new session. A
    receiver that lost its sessions is forgotten even when nothing can be sent again. (Pure.)"""
    ways: dict[str, Way] = {}
    forget = False
    for msg_id, state, reason in items:
        if state != "refused" or msg_id not in unreached:
            continue
        cause = cause_of(reason, highest.get(msg_id))
        forget = forget or cause is Cause.NO_SESSION
        way = next_way(cause, mine[msg_id].sends, mine[msg_id].way)
        if way is not None:
            ways[msg_id] = way
    forget = forget or Way.NEW_SESSION in ways.values()
    if forget:
        ways = {i: Way.NEW_SESSION if way is Way.SAME_SESSION else way for i, way in ways.items()}
    return forget, ways


def never_reached(mine: dict[str, Entry], items: list[tuple[str, str, str]]) -> set[str]:
    """The ids among a receipt's items of messages of ours that no receipt, this one included,
    ever said reached the receiver (spooled or later): only those may a refusal bring back. A
    refusal of mail that did arrive cannot be its receiver's honest word, which would have
    refused it on arrival; it is what a relay holding stolen keys would say to have the message
    sent again in a session it can open. (Pure: `mine` is not changed.)"""
    after = {msg_id: copy.copy(mine[msg_id]) for msg_id, _, _ in items}
    for msg_id, state, reason in items:
        advance(after[msg_id], state, reason, 0.0)
    return {msg_id for msg_id, entry in after.items() if entry.state in REFUSALS}
