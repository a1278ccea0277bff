"""follower.relay.push: a stream frame carries a message only when every field checks out;
anything else is a bare wake-up, and nothing a frame holds can raise."""

from __future__ import annotations

import base64
import json
import threading

import pytest

from follower.relay.push import MAX_MESSAGE, PushedMail, PushListener, pushed_mail
from keys.envelope import MAX_BLOB

BLOB = base64.b64encode(b"sealed").decode()


def test_a_frame_with_a_blob_is_the_message_it_carries() -> None:
    item = pushed_mail(json.dumps({"type": "mail", "tag": "ab", "id": "9", "blob": BLOB}))
    assert item is not None and (item.id, item.tag, item.blob) == ("9", "ab", b"sealed")


@pytest.mark.parametrize("frame", [
    json.dumps({"type": "ready"}),
    json.dumps({"type": "mail", "tag": "ab"}),  # a bare wake-up: the fetch brings it
    json.dumps({"type": "mail", "tag": "ab", "id": "9", "blob": "!!not base64!!"}),
    json.dumps({"type": "mail", "tag": "ab", "id": 9, "blob": BLOB}),
    json.dumps({"type": "mail", "tag": "ab", "id": "", "blob": BLOB}),
    json.dumps({"type": "mail", "tag": "ab", "id": "9 OR 1=1", "blob": BLOB}),
    json.dumps({"type": "mail", "tag": "ab", "id": "٩", "blob": BLOB}),  # a digit, not ASCII
    json.dumps({"type": "mail", "tag": "ab", "id": "9" * 65, "blob": BLOB}),
    json.dumps({"type": "mail", "tag": ["ab"], "id": "9", "blob": BLOB}),
    json.dumps({"type": "mail", "tag": "ab", "blob": BLOB}),
    json.dumps({"type": "mail", "tag": "ab", "id": "9", "blob": None}),
    json.dumps({"type": "mail", "tag": "ab", "id": "9", "blob": BLOB, "type2": "\ud800"}),
    json.dumps(["mail", "ab", "9", BLOB]),
    '{"type": "mail", "blob": ' + "[" * 5000 + "]" * 5000 + "}",
    "not json at all",
    b"\xff\xfe\x00binary",
    "",
    "x" * (MAX_MESSAGE + 1),
])
def test_anything_else_is_a_bare_wake_up(frame: str | bytes) -> None:
    assert pushed_mail(frame) is None


def test_a_blob_over_the_envelope_limit_is_refused() -> None:
    big = base64.b64encode(b"x" * (MAX_BLOB + 1)).decode()
    frame = json.dumps({"type": "mail", "tag": "ab", "id": "9", "blob": big})
    assert pushed_mail(frame) is None  # over the frame cap too, and refused on its own


def test_pushed_mail_is_taken_once_and_bounded() -> None:
    mail = PushedMail(most=2)
    item = pushed_mail(json.dumps({"type": "mail", "tag": "ab", "id": "9", "blob": BLOB}))
    assert item is not None
    for _ in range(3):
        mail.put(item)
    assert len(mail.take()) == 2 and mail.take() == []


class _Signer:
    fingerprint = "ab" * 16

    def sign(self, message: bytes) -> bytes:
        return b""


MAIL_FRAME = json.dumps({"type": "mail", "tag": "ab", "id": "9", "blob": BLOB})


@pytest.mark.parametrize("taken", [True, False])
def test_pushed_mail_is_offered_on_the_push_thread_and_wakes_the_loop_if_not_taken(taken: bool) -> None:
    wake, mail, offered = threading.Event(), PushedMail(), []

    def take() -> bool:
        offered.append(len(mail.take()))
        return taken

    listener = PushListener("http://127.0.0.1:1", _Signer(), wake, lambda state: None, mail, take=take)
    listener.received(MAIL_FRAME)
    assert offered == [1]  # the message was waiting when it was offered
    assert wake.is_set() is not taken


@pytest.mark.parametrize("frame", [json.dumps({"type": "ready"}), json.dumps({"type": "mail", "tag": "ab"})])
def test_a_frame_without_a_message_wakes_the_loop_and_offers_nothing(frame: str) -> None:
    wake, offered = threading.Event(), []

    def take() -> bool:
        offered.append(1)
        return True

    listener = PushListener("http://127.0.0.1:1", _Signer(), wake, lambda state: None, PushedMail(),
                            take=take)
    listener.received(frame)
    assert wake.is_set() and offered == []
