"""relay.config: each registered tag's share of the mailbox, by default and as set."""

from __future__ import annotations

import pytest

from relay.config import TAG_SHARE_FLOOR, RelayConfig


def test_a_tags_share_is_a_tenth_of_the_mailbox_by_default() -> None:
    config = RelayConfig()
    assert config.tag_messages == config.max_mailbox_messages // 10 == 1000
    assert config.tag_bytes == config.max_mailbox_bytes // 10


def test_a_small_mailbox_still_takes_a_long_conversation_from_one_contact() -> None:
    config = RelayConfig(max_mailbox_messages=30)
    assert config.tag_messages == TAG_SHARE_FLOOR  # above the mailbox: the mailbox's cap rules
    assert config.tag_bytes == config.max_mailbox_bytes


def test_a_set_share_is_kept_and_its_bytes_follow() -> None:
    config = RelayConfig(max_mailbox_messages=20, max_tag_messages=5)
    assert config.tag_messages == 5
    assert config.tag_bytes == config.max_mailbox_bytes // 4
    with pytest.raises(ValueError, match="positive"):
        RelayConfig(max_tag_messages=0)
