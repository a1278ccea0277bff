"""keys.gate, for group blocks: a group message rides a chat, a control message is a "group",
and every field of either has its shape, or the whole message is refused."""

from __future__ import annotations

import time
from typing import Any

import pytest

from keys.encoding import utc_now_iso
from keys.gate import MAX_GROUP_KEY, MAX_GROUP_MEMBERS, MAX_TEXT, Invalid, check_inner
from tests.unit.samples import FP_A, FP_B, FP_C

GID = "1" * 32
SESSION = "A" * 43
MESSAGE = {"id": GID, "name": "team", "gm": "2" * 32, "session": SESSION, "body": "QUJD", "by": "agent"}
UPDATE = {"op": "update", "id": GID, "name": "team", "owner": FP_A, "members": [FP_A, FP_B], "version": 2}


def envelope(kind: str, group: object, **more: Any) -> dict[str, Any]:
    return {"v": 1, "id": "3" * 32, "from": FP_A, "to": FP_B, "ts": utc_now_iso(), "kind": kind, "text": "",
            "group": group, **more}


def checked(kind: str, group: object, **more: Any) -> dict[str, Any]:
    block: dict[str, Any] = check_inner(envelope(kind, group, **more), time.time())["extra"]["group"]
    return block


def test_a_group_message_and_the_two_control_messages_pass_with_unknown_fields_dropped() -> None:
    assert checked("chat", {**MESSAGE, "key": "S2V5", "admin": True}) == {**MESSAGE, "key": "S2V5"}
    assert checked("chat", {**MESSAGE, "export": "RXhw"}) == {**MESSAGE, "export": "RXhw"}
    assert checked("group", {**UPDATE, "extra": 1}) == UPDATE
    assert checked("group", {"op": "leave", "id": GID, "members": [FP_C]}) == {"op": "leave", "id": GID}


@pytest.mark.parametrize(("kind", "group"), [
    ("group", MESSAGE),  # a group message posing as a change of members
    ("chat", UPDATE),  # a change of members posing as chat
    ("receipt", MESSAGE),
    ("contact_accepted", UPDATE),
])
def test_a_block_on_the_wrong_kind_is_refused(kind: str, group: dict[str, Any]) -> None:
    with pytest.raises(Invalid, match="does not fit"):
        check_inner(envelope(kind, group, receipts=[]), time.time())


def test_a_control_kind_without_a_block_is_refused() -> None:
    data = envelope("group", None)
    del data["group"]
    with pytest.raises(Invalid, match="does not fit"):
        check_inner(data, time.time())


@pytest.mark.parametrize(("change", "why"), [
    ({"id": "G" * 32}, "id"),
    ({"session": "A" * 44}, "session"),
    ({"session": "A" * 42 + "\n"}, "session"),
    ({"by": "user"}, "by"),
    ({"by": None}, "by"),
    ({"gm": 7}, "gm"),
    ({"name": "../../etc"}, "name"),
    ({"name": "b\u043eb"}, "name"),  # a Latin name with a Cyrillic o
    ({"name": "x" * 1000}, "name"),
    ({"body": ""}, "body"),
    ({"body": "A" * (2 * MAX_TEXT + 1)}, "body"),
    ({"body": "not base64!"}, "body"),
    ({"key": "K" * (MAX_GROUP_KEY + 1)}, "key"),
    ({"key": ["a"]}, "key"),
    ({"export": "E" * (MAX_GROUP_KEY + 1)}, "export"),
    ({"export": None}, "export"),
    ({"export": "not base64!"}, "export"),
    ({"key": "S2V5", "export": "RXhw"}, "both a key and an export"),
])
def test_a_malformed_or_oversize_group_message_is_refused(change: dict[str, Any], why: str) -> None:
    with pytest.raises(Invalid, match=why):
        checked("chat", {**MESSAGE, **change})


@pytest.mark.parametrize(("change", "why"), [
    ({"op": "delete"}, "op"),
    ({"members": []}, "members"),
    ({"members": [FP_A, FP_A]}, "members"),
    ({"members": [FP_A, "x"]}, "members"),
    ({"members": [f"{n:032x}" for n in range(MAX_GROUP_MEMBERS + 1)]}, "members"),
    ({"members": FP_A}, "members"),
    ({"version": 0}, "version"),
    ({"version": True}, "version"),
    ({"version": "3"}, "version"),
    ({"owner": None}, "owner"),
])
def test_a_malformed_control_message_is_refused(change: dict[str, Any], why: str) -> None:
    with pytest.raises(Invalid, match=why):
        checked("group", {**UPDATE, **change})


def test_a_group_block_that_is_no_object_is_refused() -> None:
    with pytest.raises(Invalid, match="group is not an object"):
        checked("chat", [MESSAGE])
