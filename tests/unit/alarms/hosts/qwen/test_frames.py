"""Qwen Code's frames as the Qwen door writes and reads them: every byte read back is hostile."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from alarms.hosts.qwen.frames import (
    DELIVERED,
    DROPPED,
    EXPIRED,
    HELD,
    MAX_LINE_BYTES,
    PENDING,
    QwenReceipt,
    auth_line,
    batch_msg_id,
    can_follow,
    canonical,
    fits,
    is_msg_id,
    parse_auth,
    parse_receipt,
    user_frame,
    wire,
)


def receipt(**fields: object) -> bytes:
    base = {"msgV": 1, "msgId": "r1", "type": "control", "action": "delivery_status",
            "status": "delivered", "origMsgId": "talk-abc"}
    return json.dumps({**base, **fields}).encode()


def test_a_batch_keeps_its_id_and_a_new_attempt_gets_a_new_one() -> None:
    one = batch_msg_id(["m1", "m2"], 0)
    assert one == batch_msg_id(["m1", "m2"], 0) and is_msg_id(one) and len(one) <= 64
    assert one != batch_msg_id(["m1", "m2"], 1) != batch_msg_id(["m2", "m1"], 0)


def test_message_ids_follow_qwens_grammar() -> None:
    assert is_msg_id("a") and is_msg_id("A-b_9") and is_msg_id("x" * 64)
    for bad in ("", "-a", "_a", "x" * 65, "a b", "a\n", "all", "A-L-L", 7, None, "é"):
        assert not is_msg_id(bad), bad
    assert canonical("Ab-C-d") == "abcd"


def test_the_user_frame_is_one_line_addressed_and_claims_no_review_class() -> None:
    line = user_frame("talk-1", "hi\nthere \u2028", to_session="s1", from_path="/run/x.sock",
                      reply_token="t" * 64, from_name="talk")
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    obj = json.loads(line)
    assert obj["toSessionId"] == "s1" and obj["message"] == {"role": "user", "content": "hi\nthere \u2028"}
    assert "fromMode" not in obj and obj["type"] == "user" and obj["msgV"] == 1
    assert wire("qpc_x", line) == auth_line("qpc_x") + line
    assert wire(None, line) == line  # a record without an ipcToken: an older Qwen takes no auth line
    assert parse_auth(auth_line("qpc_x")) == "qpc_x"
    with pytest.raises(ValueError):
        user_frame("all", "x", to_session="s", from_path="/p", reply_token="t", from_name="n")
    with pytest.raises(ValueError):
        user_frame("ok", "", to_session="s", from_path="/p", reply_token="t", from_name="n")


def test_a_frame_over_qwens_line_limit_is_refused() -> None:
    big = user_frame("ok", "x" * MAX_LINE_BYTES, to_session="s", from_path="/p", reply_token="t",
                     from_name="n")
    with pytest.raises(ValueError):
        wire("qpc_x", big)
    assert fits("x" * 60_000) and not fits("x" * MAX_LINE_BYTES)


def test_receipts_are_read_only_in_their_documented_shape() -> None:
    assert parse_receipt(receipt()) == QwenReceipt(DELIVERED, "talk-abc")
    dropped = receipt(status="dropped", dropReason="queue-full", droppedMsgIds=["b", "bad id", 3])
    assert parse_receipt(dropped) == QwenReceipt(DROPPED, "talk-abc", "queue-full", ("b",))
    odd = receipt(status="dropped", dropReason="other")
    assert parse_receipt(odd) == QwenReceipt(DROPPED, "talk-abc", None, ())
    for bad in (receipt(status="read"), receipt(msgV=2), receipt(msgV=True), receipt(msgV="1"),
                receipt(origMsgId="all"), receipt(origMsgId=""), receipt(type="user"), receipt(action="x"),
                b"[1]", b"{", b"", b"null", b"\xff\xfe", b"[" * 100_000):
        assert parse_receipt(bad) is None, bad
    assert parse_auth(b'{"msgV":1,"type":"auth","token":"a b"}') is None
    assert parse_auth(b'{"msgV":1,"type":"auth","token":5}') is None
    assert parse_auth(receipt()) is None


@given(st.binary(max_size=512))
def test_no_bytes_break_the_readers(data: bytes) -> None:
    parsed = parse_receipt(data)
    assert parsed is None or is_msg_id(parsed.orig)
    token = parse_auth(data)
    assert token is None or (token and " " not in token)


@given(st.dictionaries(st.sampled_from(["msgV", "type", "action", "status", "origMsgId", "dropReason",
                                        "droppedMsgIds"]),
                       st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=70),
                                 st.lists(st.sampled_from(["a", "b-1", "all", " ", ""]), max_size=300))))
def test_no_json_object_breaks_the_receipt_reader(obj: dict[str, object]) -> None:
    parsed = parse_receipt(json.dumps(obj).encode())
    if parsed is not None:
        assert is_msg_id(parsed.orig) and len(parsed.dropped) <= 256 and all(map(is_msg_id, parsed.dropped))


def test_transitions_follow_the_protocol() -> None:
    assert can_follow(PENDING, HELD) and can_follow(HELD, DELIVERED) and can_follow(DELIVERED, EXPIRED)
    assert not can_follow(DELIVERED, DELIVERED) and not can_follow(DELIVERED, HELD)
    assert not can_follow(HELD, HELD) and not can_follow("denied", DELIVERED)
