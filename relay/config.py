"""Relay limits and settings, with defaults a small team never needs to touch."""

from __future__ import annotations

from dataclasses import dataclass

from keys.envelope import MAX_BLOB
from relay.limits import Rate

# Far above what a team of agents sends, low enough that one script cannot fill the disk in minutes.
CLIENT_RATE = Rate(50.0, 200.0)  # `50/1:200`
TAG_RATE = Rate(20.0, 100.0)  # `20/1:100`


@dataclass(frozen=True)
class RelayConfig:
    max_blob: int = MAX_BLOB  # bytes per deposited blob (413 above)
    max_mailbox_messages: int = 10_000  # undelivered blobs per mailbox (507 above)
    max_mailbox_bytes: int = 256 * 1024 * 1024
    ttl_s: float = 7 * 86400  # undelivered mail older than this is deleted
    fetch_limit: int = 100  # blobs per fetch page
    max_tags: int = 1000  # tags named in one fetch
    purge_interval_s: float = 60.0
    rate_per_client: Rate = CLIENT_RATE  # deposits per second from one address (429 above)
    rate_per_tag: Rate = TAG_RATE  # deposits per second into one channel (429 above)
    max_streams_per_mailbox: int = 8  # open push streams per mailbox on this process (429 above)
    behind_proxy: bool = False  # trust the first X-Forwarded-For hop as the client address

    def __post_init__(self) -> None:
        if self.max_blob <= 0 or self.ttl_s <= 0 or self.max_mailbox_messages <= 0:
            raise ValueError("relay limits must be positive")
        if self.max_streams_per_mailbox <= 0:
            raise ValueError("relay limits must be positive")
