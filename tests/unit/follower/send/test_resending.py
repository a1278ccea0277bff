"""follower.send.resending: which refusals send a message again, how,
and when a refusal is final."""

from __future__ import annotations

import pytest

from follower.send.outbox import Entry
from follower.send.resending import (
    MAX_SENDS,
    Cause,
    Way,
    cause_of,
    final_reason,
    never_reached,
    next_way,
    resends,
)
from tests.unit.samples import FP_B, hexid

# How the receiver's refusals begin (`follower.receive.inbound.Receiver.open_ratchet`).
NO_SESSION = Cause.NO_SESSION.value
UNOPENED = Cause.UNOPENED.value

LOST = f"{NO_SESSION}: no ratchet session with this peer opens the message"
UNOPENED_REASON = f"{UNOPENED}: it opened in none of the sessions held with alice"
REPLAY = "a message from alice was refused as a replay: its sequence number 3 was already used"


def entry(n: int, state: str = "stored", sends: int = 1, way: str = "") -> Entry:
    return Entry(hexid(n), FP_B, "bob", "chat", "hi", 100.0, state=state, sends=sends, way=way)


def test_each_cause_is_told_from_the_reason_and_a_named_highest_number() -> None:
    assert cause_of(LOST, None) is Cause.NO_SESSION
    assert cause_of(UNOPENED_REASON, None) is Cause.UNOPENED
    assert cause_of(REPLAY, 20) is Cause.REPLAY
    assert cause_of(REPLAY, None) is Cause.OTHER  # an older receiver names no highest: nothing to number past
    assert cause_of("refused by policy", None) is Cause.OTHER


def test_a_lost_session_is_always_answered_in_a_new_one() -> None:
    assert next_way(Cause.NO_SESSION, 1, "") is Way.NEW_SESSION
    assert next_way(Cause.NO_SESSION, 2, Way.NEW_SESSION) is Way.NEW_SESSION


def test_an_unopened_message_goes_again_in_the_same_session_then_in_a_new_one() -> None:
    assert next_way(Cause.UNOPENED, 1, "") is Way.SAME_SESSION
    assert next_way(Cause.UNOPENED, 2, Way.SAME_SESSION) is Way.NEW_SESSION
    assert next_way(Cause.UNOPENED, 3, Way.NEW_SESSION) is Way.SAME_SESSION
    assert next_way(Cause.UNOPENED, 2, Way.RENUMBERED) is Way.SAME_SESSION


def test_a_reused_number_is_answered_under_a_fresh_one() -> None:
    assert next_way(Cause.REPLAY, 1, "") is Way.RENUMBERED
    assert next_way(Cause.REPLAY, 2, Way.NEW_SESSION) is Way.RENUMBERED


@pytest.mark.parametrize("cause", [Cause.NO_SESSION, Cause.UNOPENED, Cause.REPLAY])
def test_past_the_bound_every_refusal_is_final(cause: Cause) -> None:
    assert next_way(cause, MAX_SENDS - 1, "") is not None
    assert next_way(cause, MAX_SENDS, "") is None


def test_a_refusal_for_the_message_itself_is_final_at_once() -> None:
    assert next_way(Cause.OTHER, 1, "") is None


def test_a_final_refusal_after_several_copies_says_how_many() -> None:
    assert final_reason(4, LOST) == f"refused after 4 attempts: {LOST}"
    assert final_reason(1, "refused by policy") == "refused by policy"


def test_a_receipt_brings_back_only_what_never_arrived_each_its_own_way() -> None:
    mine = {e.id: e for e in (entry(1), entry(2), entry(3, sends=MAX_SENDS), entry(4), entry(5))}
    items = [(hexid(1), "refused", UNOPENED_REASON), (hexid(2), "refused", REPLAY),
             (hexid(3), "refused", UNOPENED_REASON), (hexid(4), "refused", "refused by policy"),
             (hexid(5), "delivered", "")]
    unreached = {hexid(1), hexid(2), hexid(3), hexid(4)}
    forget, ways = resends(mine, items, {hexid(2): 40}, unreached)
    assert not forget
    assert ways == {hexid(1): Way.SAME_SESSION, hexid(2): Way.RENUMBERED}


def test_mail_a_receipt_said_arrived_is_never_brought_back() -> None:
    mine = {e.id: e for e in (entry(1, state="spooled"),)}
    assert resends(mine, [(hexid(1), "refused", LOST)], {}, set()) == (False, {})


def test_one_forget_sends_every_message_brought_back_in_the_new_session() -> None:
    mine = {e.id: e for e in (entry(1), entry(2, sends=2, way=Way.SAME_SESSION), entry(3))}
    items = [(hexid(1), "refused", UNOPENED_REASON), (hexid(2), "refused", UNOPENED_REASON),
             (hexid(3), "refused", REPLAY)]
    forget, ways = resends(mine, items, {hexid(3): 9}, {hexid(1), hexid(2), hexid(3)})
    assert forget
    assert ways == {hexid(1): Way.NEW_SESSION, hexid(2): Way.NEW_SESSION, hexid(3): Way.RENUMBERED}


def test_a_lost_session_is_forgotten_even_when_its_message_is_past_the_bound() -> None:
    mine = {hexid(1): entry(1, sends=MAX_SENDS)}
    assert resends(mine, [(hexid(1), "refused", LOST)], {}, {hexid(1)}) == (True, {})


# never_reached: which refusals in a receipt may bring a message back.

NOT_OPENED_REASON = f"{UNOPENED}: no ratchet session with this peer, nor an archived chain, opens the message"


def kept(**states: str) -> dict[str, Entry]:
    return {hexid(int(n)): Entry(hexid(int(n)), FP_B, "bob", "chat", "hi", 100.0, state=state)
            for n, state in ((k.lstrip("m"), v) for k, v in states.items())}


def test_only_mail_no_receipt_said_arrived_may_be_brought_back_by_a_refusal() -> None:
    mine = kept(m1="stored", m2="held", m3="spooled", m4="written", m5="delivered", m6="sent")
    items = [(hexid(n), "refused", LOST if n % 2 else NOT_OPENED_REASON) for n in range(1, 7)]
    assert never_reached(mine, items) == {hexid(1), hexid(2), hexid(6)}
    assert [e.state for e in mine.values()] == ["stored", "held", "spooled", "written", "delivered", "sent"]


def test_a_refusal_beside_an_arrival_in_the_same_receipt_brings_nothing_back() -> None:
    mine = kept(m1="stored", m2="stored")
    items = [(hexid(1), "spooled", ""), (hexid(1), "refused", LOST), (hexid(2), "refused", LOST),
             (hexid(2), "duplicate", "")]  # a duplicate means the peer already had it
    assert never_reached(mine, items) == set()
