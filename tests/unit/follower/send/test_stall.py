"""When an upload stalls, and when the follower tries it again (`follower.send.stall`)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from durable.errors import RelayError, SourceGone, UserError
from follower.send.stall import QUOTA_WAIT_S, Stall, due, look, stall_for

CANCEL = "cancel it: talk outbox --cancel 0123456789ab"


def test_a_source_gone_stalls_with_its_reason_and_what_to_do() -> None:
    stall = stall_for(SourceGone("cannot read /x/a.log: No such file or directory; check the path"),
                      ["missing"], 100.0, CANCEL)
    assert stall is not None and stall.reason.startswith("cannot read /x/a.log")
    assert "put the file back" in stall.hint and CANCEL in stall.hint
    assert stall.seen == ("missing",) and stall.retry_at is None


@pytest.mark.parametrize("exc", [
    RelayError("cannot reach the relay"),  # away: it comes back
    RelayError("slow down", 429, "rate_limited"),
    RelayError("busy", 503, "unavailable"),
    UserError("/x/a.log changed while it was sent; send it again"),  # hashed again next time
    RelayError("a lie", 400, "file_too_large"),  # the code without its status is not the refusal
])
def test_what_may_pass_by_trying_again_does_not_stall(exc: Exception) -> None:
    assert stall_for(exc, ["missing"], 100.0, CANCEL) is None


def test_a_file_over_the_relay_limit_stalls_until_it_changes() -> None:
    exc = RelayError("this relay takes files of at most 1 MiB;\nsend a smaller one", 413, "file_too_large")
    stall = stall_for(exc, ["file:1:2:3:4:r"], 100.0, CANCEL)
    assert stall is not None and "at most 1 MiB" in stall.reason and "\n" not in stall.reason
    assert CANCEL in stall.hint and stall.retry_at is None
    assert not due(stall, ["file:1:2:3:4:r"], 100.0 + 10 * QUOTA_WAIT_S)  # never, while the same
    assert due(stall, ["file:1:2:9:5:r"], 101.0)  # made smaller


def test_a_full_mailbox_is_tried_again_after_a_wait_not_every_round() -> None:
    stall = stall_for(RelayError("no room", 507, "file_quota"), ["file:1:2:3:4:r"], 100.0, CANCEL)
    assert stall is not None and stall.retry_at == 100.0 + QUOTA_WAIT_S
    assert not due(stall, ["file:1:2:3:4:r"], 100.0 + QUOTA_WAIT_S - 1)
    assert due(stall, ["file:1:2:3:4:r"], 100.0 + QUOTA_WAIT_S)


def test_a_relay_long_reason_is_cut_to_one_short_line() -> None:
    stall = stall_for(RelayError("x\r\n" * 500, 413, "file_too_large"), [], 0.0, CANCEL)
    assert stall is not None and len(stall.reason) < 400 and "\n" not in stall.reason


def test_not_stalled_is_due_and_a_stall_is_due_once_a_source_looks_otherwise() -> None:
    assert due(None, ["missing"], 0.0)
    stall = Stall("gone", "put it back", 0.0, ("missing", "file:1:2:3:4:r"))
    assert not due(stall, ["missing", "file:1:2:3:4:r"], 1e9)
    assert due(stall, ["file:1:5:3:4:r", "file:1:2:3:4:r"], 1.0)  # the first came back
    assert Stall.from_json(stall.to_json()) == stall


def test_look_tells_a_file_back_replaced_unreadable_or_not_a_file(tmp_path: Path) -> None:
    src = tmp_path / "a.log"
    assert look(str(src)) == "missing"
    src.write_bytes(b"one")
    first = look(str(src))
    assert first.startswith("file:") and first.endswith(":r")
    src.unlink()
    src.write_bytes(b"other bytes")
    assert look(str(src)) != first  # back, but another file
    src.unlink()
    src.mkdir()
    assert look(str(src)).startswith("other:")
    src.rmdir()
    src.write_bytes(b"x")
    if os.geteuid() != 0:  # root reads anything
        src.chmod(0)
        assert look(str(src)).endswith(":-")
