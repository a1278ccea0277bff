"""follower.receive.faults: which failures a message is blamed for, and the reason kept for it."""

from __future__ import annotations

from pathlib import Path

import pytest

from durable.bounded_json import JSONRefused
from durable.errors import (
    InviteError,
    LocalFileRefused,
    MalformedMessage,
    RelayError,
    TamperedMessage,
    TimedOut,
    UserError,
)
from follower.receive.faults import blames_message, refusal_reason
from follower.receive.quarantine import MAX_TEXT_KEPT, Quarantine
from keys.gate import Invalid
from keys.ratchet.sessions import Busy


@pytest.mark.parametrize("exc", [
    RecursionError("maximum recursion depth exceeded"), KeyError("bundle"), TypeError("not a dict"),
    UnicodeEncodeError("utf-8", "\ud800", 0, 1, "surrogates not allowed"), AssertionError("a bug"),
    JSONRefused("nested too deep"), Invalid("ts"), TamperedMessage("x"), MalformedMessage("x"),
    UserError("invalid name"), InviteError("x"), RuntimeError("anything else"),
])
def test_whatever_a_message_trips_is_its_own_fault(exc: Exception) -> None:
    assert blames_message(exc)


@pytest.mark.parametrize("exc", [
    OSError(28, "No space left on device"), PermissionError("denied"), MemoryError(),
    Busy("the sessions are in use"), RelayError("unreachable"), TimedOut("gave up"),
    LocalFileRefused("inbox.ndjson is a symbolic link"),
])
def test_only_faults_of_this_machine_or_the_relay_stop_acking(exc: Exception) -> None:
    assert not blames_message(exc)


class Unprintable(Exception):
    def __str__(self) -> str:
        raise ValueError("no text")


def test_a_refusal_reason_is_one_bounded_printable_line_whatever_the_error_holds() -> None:
    hostile = KeyError("\ud800\x1b[2J\u2028" + "x" * 100_000)
    reason = refusal_reason(hostile)
    assert len(reason) <= MAX_TEXT_KEPT and reason.encode()
    assert "\x1b" not in reason and "\u2028" not in reason and "\\ud800" in reason
    assert refusal_reason(Unprintable()) == "Unprintable"
    assert refusal_reason(RecursionError()) == "RecursionError"


def test_quarantining_takes_any_text(tmp_path: Path) -> None:
    Quarantine(tmp_path).keep("\ud800" * 5000, "\x00tag\u202e", b"\xff" * 100, "\udfff\n" * 50_000)
    [kept] = Quarantine(tmp_path).entries()
    assert len(kept["reason"]) == MAX_TEXT_KEPT and "\n" not in kept["reason"]
    assert kept["tag"] == "\\x00tag\\u202e" and kept["blob"]
