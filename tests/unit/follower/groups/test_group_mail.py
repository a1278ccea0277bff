"""follower.groups.group_mail: a sent group message's copies, named by its gm or a prefix of it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from durable.errors import UserError
from follower.groups.group_mail import group_status
from follower.send.outbox import Outbox
from tests.unit.samples import FP_B, FP_C, hexid


def sent(outbox: Outbox, msg_id: str, to: str, gm: str | None) -> None:
    noted: dict[str, Any] = {"group": "team", "gm": gm} if gm else {}
    outbox.sent(msg_id, to, to[:4], "chat", "hello", "tag", "blob", **noted)


def test_a_group_message_is_found_by_its_gm_or_a_prefix_and_a_shared_prefix_is_named(tmp_path: Path) -> None:
    outbox = Outbox(tmp_path)
    gm, other = "abc123" + "0" * 26, "abc999" + "0" * 26
    sent(outbox, hexid(1), FP_B, gm)
    sent(outbox, hexid(2), FP_C, gm)
    sent(outbox, hexid(3), FP_B, other)
    sent(outbox, "abc123ff" + "1" * 24, FP_B, None)  # a pairwise message
    for typed in (gm, "abc1230", gm[:20].upper()):
        found = group_status(outbox, typed)
        assert found is not None and found["gm"] == gm
        assert [m["id"] for m in found["members"]] == [hexid(1), hexid(2)]
    with pytest.raises(UserError, match="ambiguous: abc123 matches 2"):
        group_status(outbox, "abc123")  # a group message and a pairwise one
    assert group_status(outbox, "abc123ff") is None  # a pairwise message's id: the caller shows it
    assert group_status(outbox, "fff000") is None and group_status(outbox, "") is None
