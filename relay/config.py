"""Relay limits and settings, with defaults a small team never needs to touch."""

from __future__ import annotations

from dataclasses import dataclass, replace

from keys.envelope import MAX_BLOB
from relay.file_store import FileQuota
from relay.limits import Network, Rate
from relay.store import MOST_TAGS

__all__ = ["HttpLimits", "RelayConfig"]

# Far above what a team of agents sends, low enough that one script cannot fill the disk in minutes.
CLIENT_RATE = Rate(50.0, 200.0)  # `50/1:200`
TAG_RATE = Rate(20.0, 100.0)  # `20/1:100`
# Per client address, each far above what a team's followers and CLIs send from one machine.
PUBLISH_RATE = Rate(10 / 60, 200.0)  # `10/60:200`: new mailboxes (a script made 1,000 in 2 s)
LOOKUP_RATE = Rate(20.0, 400.0)  # `20/1:400`: key bundles read
OWNER_RATE = Rate(100.0, 2000.0)  # `100/1:2000`: signed owner requests (each costs a signature check)
STREAM_RATE = Rate(2.0, 60.0)  # `2/1:60`: push stream handshakes
# File chunks (256 KiB each) per client address: ~100 MB/s, far above one sender's upload.
CHUNK_RATE = Rate(400.0, 800.0)  # `400/1:800`
MIB = 1024 * 1024
# A registered tag's share of the mailbox: a tenth (1,000 of the default 10,000), so at least ten
# contacts must each fill their own before another's mail finds no room; never under the floor,
# so a small mailbox still takes a long conversation from one contact.
TAG_SHARE = 10
TAG_SHARE_FLOOR = 100
FILE_SHARE = 4  # one registered tag holds at most a quarter of a mailbox's file bytes


@dataclass(frozen=True)
class HttpLimits:
    """Per-connection limits of the HTTP server (`relay.http_limits`)."""

    max_header_bytes: int = 64 * 1024  # request line and headers (431 above)
    max_headers: int = 100  # header fields per request (431 above)
    header_timeout_s: float = 10.0  # to send a whole request head (408, then closed)
    max_connections: int = 4096  # open connections per process (503 above)
    max_per_peer: int = 512  # open HTTP connections per peer address (503 above); 0: no cap
    body_timeout_s: float = 30.0  # to send a whole request body, once its head is in (408, then closed)

    def __post_init__(self) -> None:
        if min(self.max_header_bytes, self.max_headers, self.max_connections) <= 0 or self.max_per_peer < 0:
            raise ValueError("HTTP limits must be positive")
        if self.header_timeout_s <= 0 or self.body_timeout_s <= 0:
            raise ValueError("the header and body timeouts must be positive")


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
    rate_publish: Rate = PUBLISH_RATE  # key publications per client address (429 above)
    rate_lookup: Rate = LOOKUP_RATE  # key lookups per client address (429 above)
    rate_owner: Rate = OWNER_RATE  # owner requests per client address (429 above)
    rate_stream: Rate = STREAM_RATE  # stream handshakes per client address (429 above)
    max_streams_per_mailbox: int = 8  # open push streams per mailbox on this process (429 above)
    # Mail under tags the owner never named in a fetch: a quota of its own, so junk under
    # random tags cannot fill the room meant for the owner's contacts (see relay.store).
    max_unknown_messages: int = 200
    # One registered tag (one contact's channel) holds at most this much of the mailbox, so a
    # contact writing while the owner is offline cannot fill it for the others (relay.store).
    # None: a tenth of the mailbox, and never under TAG_SHARE_FLOOR messages.
    max_tag_messages: int | None = None
    max_ratchet_keys: int = 100  # one-time ratchet keys waiting per identity (507 above)
    # Files (`relay.file_store`): a file's plaintext size, and what one mailbox holds of them under
    # the owner's registered tags, and apart, under tags it never registered (a stranger's).
    max_file_bytes: int = 512 * MIB  # 413 above
    max_mailbox_file_bytes: int = 2048 * MIB  # 507 above
    max_mailbox_files: int = 1000
    max_unknown_file_bytes: int = 64 * MIB
    max_unknown_files: int = 16
    rate_chunks: Rate = CHUNK_RATE  # file chunks put per second from one address (429 above)
    max_known_tags: int = MOST_TAGS  # tags one mailbox may register; beyond, new names stay unknown
    behind_proxy: bool = False  # take the client address from X-Forwarded-For (relay.limits)
    trusted_proxies: tuple[Network, ...] = ()  # hops skipped from the right of X-Forwarded-For
    http: HttpLimits = HttpLimits()

    @property
    def tag_messages(self) -> int:
        """Messages one registered tag may hold: its share of `max_mailbox_messages`."""
        if self.max_tag_messages is not None:
            return self.max_tag_messages
        return max(self.max_mailbox_messages // TAG_SHARE, TAG_SHARE_FLOOR)

    @property
    def tag_bytes(self) -> int:
        """Bytes one registered tag may hold: the same share of `max_mailbox_bytes`."""
        share = self.max_mailbox_bytes * self.tag_messages // self.max_mailbox_messages
        return min(self.max_mailbox_bytes, max(share, self.max_blob))

    @property
    def file_quota(self) -> FileQuota:
        unknown_bytes = min(self.max_unknown_file_bytes, self.max_mailbox_file_bytes)
        quota = FileQuota(self.max_file_bytes, self.max_mailbox_files, self.max_mailbox_file_bytes,
                          self.max_unknown_files, unknown_bytes)
        # One contact's channel: a quarter of the owner's file room, and never less than one
        # largest file, so a contact sending while the owner is away leaves the rest to others.
        share = max(self.max_mailbox_file_bytes // FILE_SHARE, quota.sealed_file_bytes)
        return replace(quota, max_tag_bytes=min(share, self.max_mailbox_file_bytes))

    @property
    def max_unknown_bytes(self) -> int:
        return min(self.max_mailbox_bytes, self.max_unknown_messages * self.max_blob)

    def __post_init__(self) -> None:
        if self.max_blob <= 0 or self.ttl_s <= 0 or self.max_mailbox_messages <= 0:
            raise ValueError("relay limits must be positive")
        if min(self.max_streams_per_mailbox, self.max_unknown_messages, self.max_ratchet_keys,
               self.tag_messages, self.max_mailbox_files, self.max_unknown_files) <= 0:
            raise ValueError("relay limits must be positive")
        if min(self.max_file_bytes, self.max_mailbox_file_bytes, self.max_unknown_file_bytes) < 0:
            raise ValueError("relay limits must be positive")
