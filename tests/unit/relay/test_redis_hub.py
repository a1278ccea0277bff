"""relay.redis_hub: what one replica announces, every replica reads back the same."""

from __future__ import annotations

import pytest

from relay.notify import Notice
from relay.redis_hub import announcement, parse_message


@pytest.mark.parametrize("told", [Notice("ab"), Notice("ab", "12", b"sealed blob with spaces \x00\xff")])
def test_an_announcement_reads_back_as_the_notice_it_came_from(told: Notice) -> None:
    assert parse_message(announcement("fp1", told)) == ("fp1", told)


def test_the_deposit_scripts_form_and_malformed_ones() -> None:
    assert parse_message("fp1 ab") == ("fp1", Notice("ab"))  # a bare wake-up
    assert parse_message(b"fp1 ab 3 ") == ("fp1", Notice("ab", "3", b""))
    for junk in (b"", b"fp1", b" ab", b"\xff\xfe ab"):
        assert parse_message(junk) is None
