"""keys.groups.sessions: our Megolm session per group, its rotation, and others' sessions bound
to the sender that shared them."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from durable.errors import GroupRefused, UserError
from keys.groups.sessions import (
    GROUP_SESSIONS_DIR,
    IN_KEPT,
    NO_GROUP_KEY,
    ROTATE_AFTER,
    ROTATE_AFTER_S,
    GroupKeys,
    message_index,
)
from keys.groups.text import GroupText
from keys.identity import Identity
from keys.ratchet.account import RatchetAccount
from tests.unit.samples import FP_A, FP_B, FP_C, secret_forms

GID = "1" * 32
GM = "2" * 32


def words(text: str, sender: str = FP_A) -> bytes:
    """What `sender` encrypts in its own session to say `text` in the group."""
    return GroupText(GID, sender, GM, text).encode()


def sessions(folder: Path, identity: Identity) -> GroupKeys:
    folder.mkdir(mode=0o700, exist_ok=True)
    return GroupKeys(RatchetAccount(folder, identity))


@pytest.fixture
def alice(tmp_path: Path, alice_id: Identity) -> GroupKeys:
    return sessions(tmp_path / "alice", alice_id)


@pytest.fixture
def bob(tmp_path: Path, bob_id: Identity) -> GroupKeys:
    return sessions(tmp_path / "bob", bob_id)


def test_the_key_goes_once_to_each_member_and_opens_every_later_message(
        alice: GroupKeys, bob: GroupKeys) -> None:
    first = alice.encrypt(GID, [FP_B, FP_C], words("one"))
    second = alice.encrypt(GID, [FP_B, FP_C], words("two"))
    assert first.lacking == {FP_B, FP_C} and second.lacking == frozenset()
    assert first.session_id == second.session_id
    assert bob.decrypt(GID, FP_A, first.session_id, first.body, first.key).text == "one"
    assert bob.decrypt(GID, FP_A, second.session_id, second.body, None).text == "two"
    assert bob.has_inbound(GID, FP_A, first.session_id)


def test_a_message_in_a_session_without_its_key_is_refused_for_want_of_the_key(
        alice: GroupKeys, bob: GroupKeys) -> None:
    alice.encrypt(GID, [FP_B], words("missed"))
    later = alice.encrypt(GID, [FP_B], words("later"))
    wanted = f"{NO_GROUP_KEY}: session {later.session_id} of group {GID}"
    with pytest.raises(GroupRefused, match=re.escape(wanted)):
        bob.decrypt(GID, FP_A, later.session_id, later.body, None)
    alice.lacking(GID, later.session_id, FP_B)
    again = alice.encrypt(GID, [FP_B], words("again"))
    assert again.lacking == {FP_B}
    # The key sent now starts at this message: the earlier ones stay unreadable to bob.
    assert bob.decrypt(GID, FP_A, again.session_id, again.body, again.key).text == "again"
    with pytest.raises(GroupRefused, match="does not decrypt"):
        bob.decrypt(GID, FP_A, later.session_id, later.body, None)


def test_a_session_id_is_only_ever_read_under_the_sender_that_shared_it(
        alice: GroupKeys, bob: GroupKeys) -> None:
    sent = alice.encrypt(GID, [FP_B, FP_C], words("alice speaks"))
    bob.decrypt(GID, FP_A, sent.session_id, sent.body, sent.key)
    # carol replays alice's message (and key) as her own: the session is alice's here.
    with pytest.raises(GroupRefused, match="another member shared"):
        bob.decrypt(GID, FP_C, sent.session_id, sent.body, sent.key)


def test_a_key_for_another_session_than_the_one_named_is_refused(
        alice: GroupKeys, bob: GroupKeys) -> None:
    one = alice.encrypt(GID, [FP_B], words("one"))
    alice.rotate(GID)
    two = alice.encrypt(GID, [FP_B], words("two"))
    assert one.session_id != two.session_id
    with pytest.raises(GroupRefused, match="another session"):
        bob.decrypt(GID, FP_A, two.session_id, two.body, one.key)
    with pytest.raises(GroupRefused, match="does not decode"):
        bob.decrypt(GID, FP_A, two.session_id, two.body, "AAAA")
    assert not bob.has_inbound(GID, FP_A, two.session_id)


def test_a_key_already_held_is_kept_so_a_later_copy_cannot_move_where_reading_starts(
        alice: GroupKeys, bob: GroupKeys) -> None:
    first = alice.encrypt(GID, [FP_B], words("first"))
    bob.decrypt(GID, FP_A, first.session_id, first.body, first.key)
    alice.lacking(GID, first.session_id, FP_B)
    later = alice.encrypt(GID, [FP_B], words("later"))
    assert bob.decrypt(GID, FP_A, later.session_id, later.body, later.key).text == "later"
    assert bob.decrypt(GID, FP_A, first.session_id, first.body, None).text == "first"


@pytest.mark.parametrize("change", ["members", "rotate", "count", "age"])
def test_the_session_rotates_on_a_membership_change_after_100_messages_or_7_days(
        alice: GroupKeys, change: str) -> None:
    start = alice.encrypt(GID, [FP_B, FP_C], words("x"), now=1000.0)
    members, now = [FP_B, FP_C], 1000.0
    if change == "members":
        members = [FP_B]
    elif change == "rotate":
        alice.rotate(GID)
    elif change == "count":
        for _ in range(ROTATE_AFTER - 1):
            assert alice.encrypt(GID, members, words("x"), now=now).session_id == start.session_id
    else:
        almost = now + ROTATE_AFTER_S - 1
        assert alice.encrypt(GID, members, words("x"), now=almost).session_id == start.session_id
        now += ROTATE_AFTER_S
    fresh = alice.encrypt(GID, members, words("x"), now=now)
    assert fresh.session_id != start.session_id
    assert fresh.lacking == frozenset(members)  # nobody holds the new key yet
    assert alice.outbound_id(GID) == fresh.session_id


def test_pickles_are_sealed_at_rest_under_the_identity(tmp_path: Path, alice: GroupKeys,
                                                       bob: GroupKeys, alice_id: Identity,
                                                       carol_id: Identity) -> None:
    sent = alice.encrypt(GID, [FP_B], words("sealed words"))
    bob.decrypt(GID, FP_A, sent.session_id, sent.body, sent.key)
    for side in ("alice", "bob"):
        raw = (tmp_path / side / GROUP_SESSIONS_DIR / f"{GID}.json").read_bytes()
        assert b"sealed words" not in raw and sent.key.encode() not in raw
        assert not any(form in raw for form in secret_forms(alice_id))
    stranger = GroupKeys(RatchetAccount(tmp_path / "alice", carol_id))
    with pytest.raises(UserError, match="cannot be opened"):
        stranger.encrypt(GID, [FP_B], words("x"))


def test_only_each_senders_last_sessions_are_kept_so_the_file_does_not_grow_with_history(
        tmp_path: Path, alice: GroupKeys, bob: GroupKeys, carol_id: Identity) -> None:
    carol = sessions(tmp_path / "carol", carol_id)
    firsts = []
    for _ in range(IN_KEPT + 2):  # alice rotates (a membership change, say) ten times
        alice.rotate(GID)
        sent = alice.encrypt(GID, [FP_B], words("from alice"))
        assert bob.decrypt(GID, FP_A, sent.session_id, sent.body, sent.key).text == "from alice"
        firsts.append(sent)
    from_carol = carol.encrypt(GID, [FP_B], words("from carol", FP_C))
    bob.decrypt(GID, FP_C, from_carol.session_id, from_carol.body, from_carol.key)
    stored = json.loads((tmp_path / "bob" / GROUP_SESSIONS_DIR / f"{GID}.json").read_text())
    kept = [f"{FP_A}/{s.session_id}" for s in firsts[-IN_KEPT:]]
    assert sorted(stored["in"]) == sorted([*kept, f"{FP_C}/{from_carol.session_id}"])
    # carol's session did not push one of alice's out
    assert stored["in_order"] == [*kept, f"{FP_C}/{from_carol.session_id}"]
    late = alice.encrypt(GID, [FP_B], words("late"))  # in alice's newest session: still read
    assert bob.decrypt(GID, FP_A, late.session_id, late.body, None).text == "late"
    with pytest.raises(GroupRefused, match=NO_GROUP_KEY):  # a copy of her oldest, come after all that
        bob.decrypt(GID, FP_A, firsts[0].session_id, firsts[0].body, None)


def test_key_at_exports_our_session_from_any_message_on_for_the_current_and_last_retired_sessions(
        alice: GroupKeys, bob: GroupKeys) -> None:
    sent = [alice.encrypt(GID, [FP_B], words(f"m{n}")) for n in range(3)]
    assert [message_index(s.body) for s in sent] == [0, 1, 2]
    export = alice.key_at(GID, sent[1].session_id, 1)
    assert export is not None
    # bob held nothing: the key from message 1 on reads it and what follows, never message 0
    assert bob.decrypt(GID, FP_A, sent[1].session_id, sent[1].body, None, export).text == "m1"
    assert bob.decrypt(GID, FP_A, sent[2].session_id, sent[2].body, None).text == "m2"
    with pytest.raises(GroupRefused, match="does not decrypt"):
        bob.decrypt(GID, FP_A, sent[0].session_id, sent[0].body, None)
    for _ in range(IN_KEPT):  # still kept after IN_KEPT rotations, not after one more
        alice.rotate(GID)
        alice.encrypt(GID, [FP_B], words("x"))
    assert alice.key_at(GID, sent[0].session_id, 0) is not None
    alice.rotate(GID)
    alice.encrypt(GID, [FP_B], words("x"))
    assert alice.key_at(GID, sent[0].session_id, 0) is None
    assert alice.key_at(GID, "A" * 43, 0) is None
    assert message_index("not a megolm message") is None


def test_an_export_moves_the_senders_own_session_earlier_never_later(
        alice: GroupKeys, bob: GroupKeys) -> None:
    first, second, third = (alice.encrypt(GID, [FP_B], words(w)) for w in ("one", "two", "three"))
    bob.decrypt(GID, FP_A, second.session_id, second.body, second.key)  # held from index 1
    with pytest.raises(GroupRefused, match="does not decrypt"):
        bob.decrypt(GID, FP_A, first.session_id, first.body, None)
    later = alice.key_at(GID, first.session_id, 2)
    assert bob.decrypt(GID, FP_A, third.session_id, third.body, None, later).text == "three"
    with pytest.raises(GroupRefused, match="does not decrypt"):  # the later export changed nothing
        bob.decrypt(GID, FP_A, first.session_id, first.body, None)
    earlier = alice.key_at(GID, first.session_id, 0)
    assert bob.decrypt(GID, FP_A, first.session_id, first.body, None, earlier).text == "one"
    assert bob.decrypt(GID, FP_A, second.session_id, second.body, None).text == "two"


def test_an_export_is_bound_to_the_session_it_names_and_to_the_sender_that_shared_it(
        tmp_path: Path, alice: GroupKeys, bob: GroupKeys, carol_id: Identity) -> None:
    carol = sessions(tmp_path / "carol", carol_id)
    one = alice.encrypt(GID, [FP_B, FP_C], words("one"))
    alice.rotate(GID)
    two = alice.encrypt(GID, [FP_B, FP_C], words("two"))
    with pytest.raises(GroupRefused, match="another session"):
        bob.decrypt(GID, FP_A, two.session_id, two.body, None, alice.key_at(GID, one.session_id, 0))
    with pytest.raises(GroupRefused, match="does not decode"):
        bob.decrypt(GID, FP_A, two.session_id, two.body, None, "AAAA")
    assert not bob.has_inbound(GID, FP_A, two.session_id)
    # carol holds alice's key and exports it as her own: bob holds alice's, so it is hers alone.
    carol.decrypt(GID, FP_A, one.session_id, one.body, one.key)
    bob.decrypt(GID, FP_A, one.session_id, one.body, one.key)
    stolen = alice.key_at(GID, one.session_id, 0)
    with pytest.raises(GroupRefused, match="another member shared"):
        bob.decrypt(GID, FP_C, one.session_id, one.body, None, stolen)
    assert not bob.has_inbound(GID, FP_C, one.session_id)


@pytest.mark.parametrize("passed_on", ["key", "export"])
def test_a_member_passing_on_anothers_session_fills_no_slot_and_blocks_nothing(
        tmp_path: Path, alice: GroupKeys, bob: GroupKeys, carol_id: Identity, passed_on: str) -> None:
    """carol holds alice's session (alice sent it to her) and sends it, with alice's message, to
    bob as her own, before alice's copy reaches him: refused, and alice's copies then open."""
    carol = sessions(tmp_path / "carol", carol_id)
    first = alice.encrypt(GID, [FP_B, FP_C], words("alice's words"))
    later = alice.encrypt(GID, [FP_B, FP_C], words("alice again"))
    carol.decrypt(GID, FP_A, first.session_id, first.body, first.key)
    key, export = (first.key, None) if passed_on == "key" else (None, alice.key_at(GID, first.session_id, 0))
    with pytest.raises(GroupRefused, match="may not pass another's words on"):
        bob.decrypt(GID, FP_C, first.session_id, first.body, key, export)
    assert not bob.has_inbound(GID, FP_C, first.session_id)
    assert bob.decrypt(GID, FP_A, first.session_id, first.body, first.key).sender == FP_A  # alice's copy
    assert bob.decrypt(GID, FP_A, later.session_id, later.body, None).text == "alice again"


def test_words_for_another_group_or_without_a_writer_are_refused_and_fill_no_slot(
        alice: GroupKeys, bob: GroupKeys) -> None:
    elsewhere = alice.encrypt(GID, [FP_B], GroupText("9" * 32, FP_A, GM, "x").encode())
    with pytest.raises(GroupRefused, match="another group"):
        bob.decrypt(GID, FP_A, elsewhere.session_id, elsewhere.body, elsewhere.key)
    alice.rotate(GID)
    older = alice.encrypt(GID, [FP_B], json.dumps({"gm": GM, "text": "no writer"}).encode())
    with pytest.raises(GroupRefused, match="names no group, writer or message id"):
        bob.decrypt(GID, FP_A, older.session_id, older.body, older.key)
    alice.rotate(GID)
    damaged = alice.encrypt(GID, [FP_B], b"[]")
    with pytest.raises(GroupRefused, match="holds no valid text"):
        bob.decrypt(GID, FP_A, damaged.session_id, damaged.body, damaged.key)
    assert not bob.has_inbound(GID, FP_A, elsewhere.session_id)
    assert not bob.has_inbound(GID, FP_A, older.session_id)


def test_a_first_copy_held_back_by_the_relay_is_read_after_a_later_one_was_sent_again(
        alice: GroupKeys, bob: GroupKeys) -> None:
    first = alice.encrypt(GID, [FP_B], words("first"))  # its copy carries the key; the relay holds it
    second = alice.encrypt(GID, [FP_B], words("second"))
    with pytest.raises(GroupRefused, match=NO_GROUP_KEY):
        bob.decrypt(GID, FP_A, second.session_id, second.body, None)
    again = alice.key_at(GID, second.session_id, 1)  # the refused copy, sent again with the key
    assert bob.decrypt(GID, FP_A, second.session_id, second.body, None, again).text == "second"
    assert bob.decrypt(GID, FP_A, first.session_id, first.body, first.key).text == "first"
    assert bob.decrypt(GID, FP_A, second.session_id, second.body, None).text == "second"
