"""keys.group_sessions: our Megolm session per group, its rotation, and others' sessions bound
to the sender that shared them."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from durable.errors import GroupRefused, UserError
from keys.group_sessions import (
    GROUP_SESSIONS_DIR,
    IN_KEPT,
    NO_GROUP_KEY,
    ROTATE_AFTER,
    ROTATE_AFTER_S,
    GroupSessions,
)
from keys.identity import Identity
from keys.ratchet_account import RatchetAccount
from tests.unit.samples import FP_A, FP_B, FP_C, secret_forms

GID = "1" * 32


def sessions(folder: Path, identity: Identity) -> GroupSessions:
    folder.mkdir(mode=0o700, exist_ok=True)
    return GroupSessions(RatchetAccount(folder, identity))


@pytest.fixture
def alice(tmp_path: Path, alice_id: Identity) -> GroupSessions:
    return sessions(tmp_path / "alice", alice_id)


@pytest.fixture
def bob(tmp_path: Path, bob_id: Identity) -> GroupSessions:
    return sessions(tmp_path / "bob", bob_id)


def test_the_key_goes_once_to_each_member_and_opens_every_later_message(
        alice: GroupSessions, bob: GroupSessions) -> None:
    first = alice.encrypt(GID, [FP_B, FP_C], b"one")
    second = alice.encrypt(GID, [FP_B, FP_C], b"two")
    assert first.lacking == {FP_B, FP_C} and second.lacking == frozenset()
    assert first.session_id == second.session_id
    assert bob.decrypt(GID, FP_A, first.session_id, first.body, first.key) == b"one"
    assert bob.decrypt(GID, FP_A, second.session_id, second.body, None) == b"two"
    assert bob.has_inbound(GID, FP_A, first.session_id)


def test_a_message_in_a_session_without_its_key_is_refused_for_want_of_the_key(
        alice: GroupSessions, bob: GroupSessions) -> None:
    alice.encrypt(GID, [FP_B], b"missed")
    later = alice.encrypt(GID, [FP_B], b"later")
    wanted = f"{NO_GROUP_KEY}: session {later.session_id} of group {GID}"
    with pytest.raises(GroupRefused, match=re.escape(wanted)):
        bob.decrypt(GID, FP_A, later.session_id, later.body, None)
    alice.lacking(GID, later.session_id, FP_B)
    again = alice.encrypt(GID, [FP_B], b"again")
    assert again.lacking == {FP_B}
    # The key sent now starts at this message: the earlier ones stay unreadable to bob.
    assert bob.decrypt(GID, FP_A, again.session_id, again.body, again.key) == b"again"
    with pytest.raises(GroupRefused, match="does not decrypt"):
        bob.decrypt(GID, FP_A, later.session_id, later.body, None)


def test_a_session_id_is_only_ever_read_under_the_sender_that_shared_it(
        alice: GroupSessions, bob: GroupSessions) -> None:
    sent = alice.encrypt(GID, [FP_B, FP_C], b"alice speaks")
    bob.decrypt(GID, FP_A, sent.session_id, sent.body, sent.key)
    # carol replays alice's message (and key) as her own: the session is alice's here.
    with pytest.raises(GroupRefused, match="another member shared"):
        bob.decrypt(GID, FP_C, sent.session_id, sent.body, sent.key)


def test_a_key_for_another_session_than_the_one_named_is_refused(
        alice: GroupSessions, bob: GroupSessions) -> None:
    one = alice.encrypt(GID, [FP_B], b"one")
    alice.rotate(GID)
    two = alice.encrypt(GID, [FP_B], b"two")
    assert one.session_id != two.session_id
    with pytest.raises(GroupRefused, match="another session"):
        bob.decrypt(GID, FP_A, two.session_id, two.body, one.key)
    with pytest.raises(GroupRefused, match="does not decode"):
        bob.decrypt(GID, FP_A, two.session_id, two.body, "AAAA")
    assert not bob.has_inbound(GID, FP_A, two.session_id)


def test_a_key_already_held_is_kept_so_a_later_copy_cannot_move_where_reading_starts(
        alice: GroupSessions, bob: GroupSessions) -> None:
    first = alice.encrypt(GID, [FP_B], b"first")
    bob.decrypt(GID, FP_A, first.session_id, first.body, first.key)
    alice.lacking(GID, first.session_id, FP_B)
    later = alice.encrypt(GID, [FP_B], b"later")
    assert bob.decrypt(GID, FP_A, later.session_id, later.body, later.key) == b"later"
    assert bob.decrypt(GID, FP_A, first.session_id, first.body, None) == b"first"


@pytest.mark.parametrize("change", ["members", "rotate", "count", "age"])
def test_the_session_rotates_on_a_membership_change_after_100_messages_or_7_days(
        alice: GroupSessions, change: str) -> None:
    start = alice.encrypt(GID, [FP_B, FP_C], b"x", now=1000.0)
    members, now = [FP_B, FP_C], 1000.0
    if change == "members":
        members = [FP_B]
    elif change == "rotate":
        alice.rotate(GID)
    elif change == "count":
        for _ in range(ROTATE_AFTER - 1):
            assert alice.encrypt(GID, members, b"x", now=now).session_id == start.session_id
    else:
        assert alice.encrypt(GID, members, b"x", now=now + ROTATE_AFTER_S - 1).session_id == start.session_id
        now += ROTATE_AFTER_S
    fresh = alice.encrypt(GID, members, b"x", now=now)
    assert fresh.session_id != start.session_id
    assert fresh.lacking == frozenset(members)  # nobody holds the new key yet
    assert alice.outbound_id(GID) == fresh.session_id


def test_pickles_are_sealed_at_rest_under_the_identity(tmp_path: Path, alice: GroupSessions,
                                                       bob: GroupSessions, alice_id: Identity,
                                                       carol_id: Identity) -> None:
    sent = alice.encrypt(GID, [FP_B], b"sealed words")
    bob.decrypt(GID, FP_A, sent.session_id, sent.body, sent.key)
    for side in ("alice", "bob"):
        raw = (tmp_path / side / GROUP_SESSIONS_DIR / f"{GID}.json").read_bytes()
        assert b"sealed words" not in raw and sent.key.encode() not in raw
        assert not any(form in raw for form in secret_forms(alice_id))
    stranger = GroupSessions(RatchetAccount(tmp_path / "alice", carol_id))
    with pytest.raises(UserError, match="cannot be opened"):
        stranger.encrypt(GID, [FP_B], b"x")


def test_only_each_senders_last_sessions_are_kept_so_the_file_does_not_grow_with_history(
        tmp_path: Path, alice: GroupSessions, bob: GroupSessions, carol_id: Identity) -> None:
    carol = sessions(tmp_path / "carol", carol_id)
    firsts = []
    for _ in range(IN_KEPT + 2):  # alice rotates (a membership change, say) ten times
        alice.rotate(GID)
        sent = alice.encrypt(GID, [FP_B], b"from alice")
        assert bob.decrypt(GID, FP_A, sent.session_id, sent.body, sent.key) == b"from alice"
        firsts.append(sent)
    from_carol = carol.encrypt(GID, [FP_B], b"from carol")
    bob.decrypt(GID, FP_C, from_carol.session_id, from_carol.body, from_carol.key)
    stored = json.loads((tmp_path / "bob" / GROUP_SESSIONS_DIR / f"{GID}.json").read_text())
    kept = [f"{FP_A}/{s.session_id}" for s in firsts[-IN_KEPT:]]
    assert sorted(stored["in"]) == sorted([*kept, f"{FP_C}/{from_carol.session_id}"])
    # carol's session did not push one of alice's out
    assert stored["in_order"] == [*kept, f"{FP_C}/{from_carol.session_id}"]
    late = alice.encrypt(GID, [FP_B], b"late")  # in alice's newest session: still read
    assert bob.decrypt(GID, FP_A, late.session_id, late.body, None) == b"late"
    with pytest.raises(GroupRefused, match=NO_GROUP_KEY):  # a copy of her oldest, come after all that
        bob.decrypt(GID, FP_A, firsts[0].session_id, firsts[0].body, None)
