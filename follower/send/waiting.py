"""Waiting after a send (`talk send --wait STATE`): block until the message's receipts say it got that far.

With a follower running, the follower takes the receipts and this only watches the outbox: a
stat of its file every STAT_S, read again only when it changed. Without one, this fetches the
receipts itself (only those: chat mail stays on the relay for whoever reads it), woken by the
relay's push stream the moment a receipt lands (polling every POLL_S only while the stream is
not connected, FALLBACK_S when it is), and resends on the usual backoff.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from durable.errors import TimedOut, UserError
from durable.parsed_file import signature
from durable.settings import env_float
from follower.send.outbox import RANK, REFUSALS, RESEND_AFTER_S

if TYPE_CHECKING:
    from follower.relay.client import RelayClient
    from follower.send.outbox import Outbox
    from keys.identity import Identity

__all__ = ["check_wanted", "wait_for"]

WAITABLE = ("stored", "spooled", "written", "delivered")
POLL_S = 0.1  # without a push stream: fetch receipts this often
FALLBACK_S = 2.0  # with one: fetch anyway this often, in case a wake-up was lost
STAT_S = 0.01  # a follower writes the receipts: look at the outbox file this often


def reached(state: str, wanted: str) -> bool:
    return state not in REFUSALS and RANK[state] >= RANK[wanted]


def check_wanted(wanted: str) -> None:
    if wanted not in WAITABLE:
        raise UserError(f"--wait must be one of {', '.join(WAITABLE)}, not {wanted!r}")


def wait_for(outbox: Outbox, client: RelayClient, take_receipts: Callable[[], object] | None,
             identity: Callable[[], Identity], msg_id: str, wanted: str, timeout: float) -> str:
    """The state once `wanted` is reached; UserError on a final refusal, TimedOut at the end.

    `take_receipts` fetches this identity's receipts into `outbox`; None when a follower runs
    and does that (then only the outbox is watched). `identity` unlocks the keys the push
    stream signs with, called only with `take_receipts`.
    """
    check_wanted(wanted)
    from follower.send.outbound import resend_due

    resend_after = env_float("TALK_RESEND_AFTER", RESEND_AFTER_S)
    stop = time.monotonic() + timeout
    wake = threading.Event()
    push = _listen(client, identity, wake) if take_receipts is not None else None
    seen: tuple[int, int, int] | None = None
    try:
        while True:
            seen = signature(outbox.path)
            entry = outbox.find(msg_id)
            state = entry.state if entry else "sent"
            if reached(state, wanted):
                return state
            if state in REFUSALS:
                why = f": {entry.reason}" if entry and entry.reason else ""
                raise UserError(f"message {msg_id} was {state} by the recipient{why}")
            if time.monotonic() >= stop:
                raise TimedOut(f"message {msg_id} is still {state} after {timeout:g} s (wanted "
                               f"{wanted}); see `talk status {msg_id}`")
            if take_receipts is not None:
                wake.clear()  # before the fetch: a receipt landing during it wakes the next wait
                take_receipts()
                resend_due(client, outbox, time.time(), resend_after)
                if signature(outbox.path) == seen:
                    connected = push is not None and push.state == "connected"
                    wake.wait(min(FALLBACK_S if connected else POLL_S, max(0.0, stop - time.monotonic())))
            else:
                while signature(outbox.path) == seen and time.monotonic() < stop:
                    time.sleep(STAT_S)
    finally:
        if push is not None:
            push.stop()


class _Push:
    """The relay's push stream for our own mailbox, in a thread: sets `wake` on every mail."""

    def __init__(self, client: RelayClient, identity: Identity, wake: threading.Event) -> None:
        from follower.relay.push import PushListener

        self.state = "connecting"
        self.listener = PushListener(client.url, identity, wake, self._on_state)
        self.listener.start()

    def _on_state(self, state: str) -> None:
        self.state = state

    def stop(self) -> None:
        self.listener.stop()


def _listen(client: RelayClient, identity: Callable[[], Identity], wake: threading.Event) -> _Push | None:
    try:
        return _Push(client, identity(), wake)
    except Exception:  # no push (the library cannot load, say): polling still works
        return None
