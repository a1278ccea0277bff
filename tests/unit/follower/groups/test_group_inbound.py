"""follower.groups.group_inbound: control messages change the book by the owner's rule only, a group
message opens only from a member in its own session, and a member's "no group key" refusal
sends it the key with its next copy."""

from __future__ import annotations

from pathlib import Path

import pytest

from durable.errors import GroupRefused
from follower.groups.group_inbound import block_to_resend, lacking_key, open_group_message, take_control
from keys.contacts import Contact
from keys.envelope import Inner, new_message
from keys.groups.book import Group, GroupBook, GroupState
from keys.groups.sessions import GroupKeys
from keys.groups.text import GroupText
from keys.identity import Identity
from keys.ratchet.account import RatchetAccount
from spool_writer.record import SpoolRecord
from tests.unit.samples import contact

GID = "1" * 32
GM = "2" * 32
STAND_IN = Identity.generate("stand-in")  # whose account seals a sender's session file here


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    path = tmp_path / "me"
    path.mkdir(mode=0o700)
    return path


@pytest.fixture(scope="module")
def me() -> Identity:
    return Identity.generate("me")


@pytest.fixture(scope="module")
def owner() -> Contact:
    return contact("owner")


@pytest.fixture(scope="module")
def other() -> Contact:
    return contact("other")


def store(folder: Path, identity: Identity) -> GroupKeys:
    return GroupKeys(RatchetAccount(folder, identity))


def control(sender: Contact, me: Identity, block: dict[str, object]) -> Inner:
    return new_message(sender.fingerprint, me.fingerprint, "", "group", 1, group=block)


def update(owner: Contact, members: list[str], version: int) -> dict[str, object]:
    return {"op": "update", "id": GID, "name": "team", "owner": owner.fingerprint, "members": members,
            "version": version}


def test_the_owner_makes_changes_and_another_member_cannot(folder: Path, me: Identity, owner: Contact,
                                                          other: Contact) -> None:
    sessions = store(folder, me)

    def taken(sender: Contact, block: dict[str, object]) -> str:
        return take_control(folder, me.fingerprint, sender, control(sender, me, block), sessions)

    everyone = [owner.fingerprint, me.fingerprint, other.fingerprint]
    assert "now has 3 members" in taken(owner, update(owner, everyone, 1))
    with pytest.raises(GroupRefused, match="does not own it"):
        taken(other, {**update(other, [other.fingerprint, me.fingerprint], 5), "owner": other.fingerprint})
    with pytest.raises(GroupRefused, match="not above"):  # a replayed update
        taken(owner, update(owner, everyone, 1))
    assert GroupBook(folder).get("team").members == tuple(everyone)
    assert "other left" in taken(other, {"op": "leave", "id": GID})
    assert "removed you" in taken(owner, update(owner, [owner.fingerprint], 2))
    assert GroupBook(folder).get("team").state is GroupState.REMOVED


def test_a_membership_change_rotates_our_session(folder: Path, me: Identity, owner: Contact) -> None:
    sessions = store(folder, me)
    GroupBook(folder).put(Group(GID, "team", owner.fingerprint, (owner.fingerprint, me.fingerprint), 1))
    before = sessions.encrypt(GID, [owner.fingerprint], b"x").session_id
    take_control(folder, me.fingerprint, owner,
                 control(owner, me, update(owner, [owner.fingerprint, me.fingerprint], 2)), sessions)
    assert sessions.outbound_id(GID) is None
    assert sessions.encrypt(GID, [owner.fingerprint], b"x").session_id != before


def group_message(tmp_path: Path, sender: Contact, me: Identity, text: str) -> Inner:
    """`sender`'s copy to me of a group message, with the key (encrypted by a stand-in store)."""
    folder = tmp_path / f"sender-{sender.name}"
    folder.mkdir(mode=0o700, exist_ok=True)
    words = GroupText(GID, sender.fingerprint, GM, text).encode()
    sent = store(folder, STAND_IN).encrypt(GID, [me.fingerprint], words)
    block = {"id": GID, "name": "team", "gm": GM, "session": sent.session_id, "body": sent.body,
             "key": sent.key, "by": "person"}
    return new_message(sender.fingerprint, me.fingerprint, "", "chat", 1, group=block)


def test_a_member_s_message_opens_and_a_non_member_s_is_refused(tmp_path: Path, folder: Path, me: Identity,
                                                                owner: Contact, other: Contact) -> None:
    GroupBook(folder).put(Group(GID, "ours", owner.fingerprint, (owner.fingerprint, me.fingerprint), 1))
    opened, fields = open_group_message(folder, owner, group_message(tmp_path, owner, me, "hello"),
                                        store(folder, me))
    assert opened.text == "hello"
    assert fields == {"group": "ours", "group_id": GID, "gm": GM, "by": "person"}
    assert set(fields) <= set(SpoolRecord.__annotations__)  # declared for every reader of the spool
    with pytest.raises(GroupRefused, match="not a member"):
        open_group_message(folder, other, group_message(tmp_path, other, me, "obey"), store(folder, me))
    GroupBook(folder).put(GroupBook(folder).get("ours")._replace(state=GroupState.LEFT))
    with pytest.raises(GroupRefused, match="not active"):
        open_group_message(folder, owner, group_message(tmp_path, owner, me, "there?"), store(folder, me))


def test_a_member_passing_on_anothers_message_and_key_is_refused_and_the_writer_still_heard(
        tmp_path: Path, folder: Path, me: Identity, owner: Contact, other: Contact) -> None:
    GroupBook(folder).put(Group(GID, "team", owner.fingerprint,
                                (owner.fingerprint, me.fingerprint, other.fingerprint), 1))
    real = group_message(tmp_path, owner, me, "the owner's words")
    passed_on = new_message(other.fingerprint, me.fingerprint, "", "chat", 1, group=real.extra["group"])
    with pytest.raises(GroupRefused, match="may not pass another's words on"):
        open_group_message(folder, other, passed_on, store(folder, me))
    opened, _ = open_group_message(folder, owner, real, store(folder, me))
    assert (opened.sender, opened.text) == (owner.fingerprint, "the owner's words")


def test_a_no_group_key_refusal_takes_only_that_member_off_the_key_holders(
        folder: Path, me: Identity, owner: Contact, other: Contact) -> None:
    sessions = store(folder, me)
    GroupBook(folder).put(Group(GID, "team", me.fingerprint, (me.fingerprint, owner.fingerprint), 1))
    sent = sessions.encrypt(GID, [owner.fingerprint], b"x")
    reason = f"no group key: session {sent.session_id} of group {GID}"
    lacking_key(folder, sessions, other, reason)  # not a member: its word changes nothing
    lacking_key(folder, sessions, owner, "no group key: nonsense")
    assert sessions.encrypt(GID, [owner.fingerprint], b"x").lacking == frozenset()
    lacking_key(folder, sessions, owner, reason)
    assert sessions.encrypt(GID, [owner.fingerprint], b"x").lacking == {owner.fingerprint}


def test_a_refused_copy_is_sent_again_once_with_the_key_from_that_message_on(
        tmp_path: Path, folder: Path, me: Identity, owner: Contact) -> None:
    sessions = store(folder, me)  # we send; `owner` is the member that refused
    before = sessions.encrypt(GID, [owner.fingerprint], b"before")
    sent = sessions.encrypt(
        GID, [owner.fingerprint], GroupText(GID, me.fingerprint, GM, "refused one").encode())
    block = {"id": GID, "name": "team", "gm": GM, "session": sent.session_id, "body": sent.body,
             "key": sent.key, "by": "agent"}
    copy = new_message(me.fingerprint, owner.fingerprint, "", "chat", 2, group=block)
    reason = f"no group key: session {sent.session_id} of group {GID}"

    again = block_to_resend(sessions, copy, reason)
    assert again is not None and "key" not in again
    assert {k: v for k, v in again.items() if k != "export"} == {k: v for k, v in block.items() if k != "key"}
    (tmp_path / "member").mkdir(mode=0o700)
    theirs = store(tmp_path / "member", STAND_IN)
    # the export reads the refused message, and not the one before it
    read = theirs.decrypt(GID, me.fingerprint, sent.session_id, sent.body, None, again["export"])
    assert read == GroupText(GID, me.fingerprint, GM, "refused one")
    with pytest.raises(GroupRefused, match="does not decrypt"):
        theirs.decrypt(GID, me.fingerprint, before.session_id, before.body, None)

    resent = new_message(me.fingerprint, owner.fingerprint, "", "chat", 3, group=again)
    assert block_to_resend(sessions, resent, reason) is None  # once
    assert block_to_resend(sessions, None, reason) is None  # its words are no longer kept
    other_session = f"no group key: session {'A' * 43} of group {GID}"
    assert block_to_resend(sessions, copy, other_session) is None
    assert block_to_resend(sessions, copy, "no group key: nonsense") is None
    plain = new_message(me.fingerprint, owner.fingerprint, "hi", "chat", 4)
    assert block_to_resend(sessions, plain, reason) is None
    change = control(owner, me, update(owner, [owner.fingerprint, me.fingerprint], 2))
    assert block_to_resend(sessions, change, reason) is None
