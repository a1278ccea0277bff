"""Relay limits and settings, with defaults a small team never needs to touch."""

from __future__ import annotations

from dataclasses import dataclass

from keys.envelope import MAX_BLOB


@dataclass(frozen=True)
class RelayConfig:
    max_blob: int = MAX_BLOB  # bytes per deposited blob (413 above)
    max_mailbox_messages: int = 10_000  # undelivered blobs per mailbox (507 above)
    max_mailbox_bytes: int = 256 * 1024 * 1024
    ttl_s: float = 7 * 86400  # undelivered mail older than this is deleted
    fetch_limit: int = 100  # blobs per fetch page
    max_tags: int = 1000  # tags named in one fetch
    purge_interval_s: float = 60.0

    def __post_init__(self) -> None:
        if self.max_blob <= 0 or self.ttl_s <= 0 or self.max_mailbox_messages <= 0:
            raise ValueError("relay limits must be positive")
