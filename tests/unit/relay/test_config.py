"""relay.config: each registered tag's share of the mailbox, the junk quota, and the limits refused."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from relay.config import TAG_SHARE_FLOOR, HttpLimits, RelayConfig


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


def test_a_tags_bytes_never_fall_below_one_blob_nor_exceed_the_mailbox() -> None:
    tiny = RelayConfig(max_mailbox_messages=1000, max_mailbox_bytes=1000 * 1024, max_blob=512 * 1024)
    assert tiny.tag_bytes == tiny.max_blob  # a tenth would be 100 KiB: less than one message
    one_box = RelayConfig(max_mailbox_messages=50, max_mailbox_bytes=1024, max_blob=4096)
    assert one_box.tag_bytes == one_box.max_mailbox_bytes


def test_junk_may_hold_its_messages_worth_of_blobs_but_never_more_than_the_mailbox() -> None:
    assert RelayConfig(max_unknown_messages=3, max_blob=100).max_unknown_bytes == 300
    capped = RelayConfig(max_unknown_messages=200, max_blob=1 << 20, max_mailbox_bytes=1 << 24)
    assert capped.max_unknown_bytes == 1 << 24


@pytest.mark.parametrize("field", ["max_blob", "ttl_s", "max_mailbox_messages", "max_streams_per_mailbox",
                                   "max_unknown_messages", "max_ratchet_keys"])
@pytest.mark.parametrize("value", [0, -1])
def test_a_limit_that_is_not_positive_is_refused(field: str, value: int) -> None:
    with pytest.raises(ValueError, match="relay limits must be positive"):
        changes: dict[str, Any] = {field: value}
        dataclasses.replace(RelayConfig(), **changes)


@pytest.mark.parametrize("fields", [{"max_header_bytes": 0}, {"max_headers": 0}, {"max_connections": -5},
                                    {"max_per_peer": -1}, {"header_timeout_s": 0.0}])
def test_http_limits_refuse_what_would_refuse_every_request(fields: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="must be positive"):
        dataclasses.replace(HttpLimits(), **fields)


def test_no_per_peer_cap_is_a_choice_not_an_error() -> None:
    assert HttpLimits(max_per_peer=0).max_per_peer == 0
