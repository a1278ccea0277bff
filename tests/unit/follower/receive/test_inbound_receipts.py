"""follower.receive.inbound.never_reached: which refusals in a receipt may bring a message back."""

from __future__ import annotations

from follower.receive.inbound import NO_SESSION as NO_SESSION_REASON
from follower.receive.inbound import UNOPENED, never_reached
from follower.send.outbox import Entry
from tests.unit.samples import FP_B, hexid

NO_SESSION = f"{NO_SESSION_REASON}: no ratchet session with this peer opens the message"
NOT_OPENED = f"{UNOPENED}: no ratchet session with this peer, nor an archived chain, opens the message"


def outbox(**states: str) -> dict[str, Entry]:
    return {hexid(int(n)): Entry(hexid(int(n)), FP_B, "bob", "chat", "hi", 100.0, state=state)
            for n, state in ((k.lstrip("m"), v) for k, v in states.items())}


def test_only_mail_no_receipt_said_arrived_may_be_brought_back_by_a_refusal() -> None:
    mine = outbox(m1="stored", m2="held", m3="spooled", m4="written", m5="delivered", m6="sent")
    items = [(hexid(n), "refused", NO_SESSION if n % 2 else NOT_OPENED) for n in range(1, 7)]
    assert never_reached(mine, items) == {hexid(1), hexid(2), hexid(6)}
    assert [e.state for e in mine.values()] == ["stored", "held", "spooled", "written", "delivered", "sent"]


def test_a_refusal_beside_an_arrival_in_the_same_receipt_brings_nothing_back() -> None:
    mine = outbox(m1="stored", m2="stored")
    items = [(hexid(1), "spooled", ""), (hexid(1), "refused", NO_SESSION), (hexid(2), "refused", NO_SESSION),
             (hexid(2), "duplicate", "")]  # a duplicate means the peer already had it
    assert never_reached(mine, items) == set()
