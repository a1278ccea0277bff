"""`talk send --wait STATE`: block until the message's receipts say it got that far.

With a follower running, the follower takes the receipts and this only watches the outbox;
without one, this fetches the receipts itself (only those: chat mail stays on the relay for
whoever reads it) and resends on the usual backoff.
"""

from __future__ import annotations

import time
from typing import Any

from follower.outbox import RANK, REFUSALS, RESEND_AFTER_S, Outbox
from keys.errors import TimedOut, UserError

WAITABLE = ("stored", "spooled", "delivered")
POLL_S = 0.1


def reached(state: str, wanted: str) -> bool:
    return state not in REFUSALS and RANK[state] >= RANK[wanted]


def check_wanted(wanted: str) -> None:
    if wanted not in WAITABLE:
        raise UserError(f"--wait must be one of {', '.join(WAITABLE)}, not {wanted!r}")


def wait_for(s: Any, msg_id: str, wanted: str, timeout: float) -> str:
    """The state once `wanted` is reached; UserError on a final refusal, TimedOut at the end."""
    check_wanted(wanted)
    from follower.channeldb import ChannelDB
    from follower.inbound import Inbox
    from follower.outbound import resend_due
    from follower.state import running_pid
    from follower.upkeep import env_float

    outbox = Outbox(s.folder)
    inbox = None if running_pid(s.folder) else Inbox(s.identity(), s.client, s.contacts, s.invites,
                                                      ChannelDB(s.folder))
    resend_after = env_float("TALK_RESEND_AFTER", RESEND_AFTER_S)
    stop = time.monotonic() + timeout
    while True:
        entry = outbox.find(msg_id)
        state = entry.state if entry else "sent"
        if reached(state, wanted):
            return state
        if state in REFUSALS:
            why = f": {entry.reason}" if entry and entry.reason else ""
            raise UserError(f"message {msg_id} was {state} by the recipient{why}")
        if time.monotonic() >= stop:
            raise TimedOut(f"message {msg_id} is still {state} after {timeout:g} s (wanted {wanted}); "
                           f"see `talk status {msg_id}`")
        if inbox is not None:
            inbox.receive_receipts()
            resend_due(s.client, outbox, time.time(), resend_after)
        time.sleep(POLL_S)
