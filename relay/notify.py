"""Wake the push streams of a mailbox the moment mail lands in it.

`LocalHub` fans out inside one relay process; a store shared by several replicas brings a hub
that fans out across them. A notification says "look", and carries the stored blob with its id
when the blob is at most PUSH_BLOB_MAX bytes, so the owner opens it without fetching it again.
It is a copy only: the mail stays stored until the owner acks it, so a dropped or duplicated
notification costs a fetch, never a message.
"""

from __future__ import annotations

import asyncio
from typing import NamedTuple, Protocol

# Queued notices per stream: a slow stream holds at most QUEUE_DEPTH * PUSH_BLOB_MAX bytes
# (512 KiB), and a full queue already holds a wake-up, so dropping more loses nothing.
QUEUE_DEPTH = 64
# Most chat mail is sealed into the 512- or 2,048-byte bucket (`keys.envelope.BUCKETS`) plus the
# envelope; bigger blobs are left to the fetch that the wake-up causes.
PUSH_BLOB_MAX = 8192


class Notice(NamedTuple):
    """Mail came under `tag`; `mail_id` and `blob` are set when the blob rides along."""

    tag: str
    mail_id: str = ""
    blob: bytes = b""


def notice(tag: str, mail_id: str, blob: bytes) -> Notice:
    """The notice for a stored blob: with the blob when it is small enough to push."""
    return Notice(tag, mail_id, blob) if mail_id and len(blob) <= PUSH_BLOB_MAX else Notice(tag)


class Hub(Protocol):
    async def start(self) -> None:
        """Called once before the relay serves (a shared hub connects and subscribes here)."""
        ...

    async def stop(self) -> None: ...

    def subscribe(self, fp: str) -> asyncio.Queue[Notice]: ...

    async def ready(self, fp: str) -> None:
        """Return once mail deposited in `fp` from now on, through any replica, reaches the
        queues `subscribe` gave out here (a stream says "ready" only after this).

        Raises:
            StoreUnavailable: a shared hub could not listen for `fp` in time.
        """
        ...

    def unsubscribe(self, fp: str, queue: asyncio.Queue[Notice]) -> None: ...

    async def publish(self, fp: str, tag: str, mail_id: str = "", blob: bytes = b"") -> None:
        """Tell `fp`'s streams; with the blob when `notice` says it rides along."""
        ...

    def streams(self, fp: str) -> int: ...


class LocalHub:
    def __init__(self) -> None:
        self._subs: dict[str, set[asyncio.Queue[Notice]]] = {}

    async def start(self) -> None:
        pass

    async def stop(self) -> None:
        pass

    def subscribe(self, fp: str) -> asyncio.Queue[Notice]:
        queue: asyncio.Queue[Notice] = asyncio.Queue(QUEUE_DEPTH)
        self._subs.setdefault(fp, set()).add(queue)
        return queue

    async def ready(self, fp: str) -> None:
        pass  # one process: `publish` reaches every queue at once

    def unsubscribe(self, fp: str, queue: asyncio.Queue[Notice]) -> None:
        subs = self._subs.get(fp)
        if subs is not None:
            subs.discard(queue)
            if not subs:
                del self._subs[fp]

    async def publish(self, fp: str, tag: str, mail_id: str = "", blob: bytes = b"") -> None:
        self.tell(fp, notice(tag, mail_id, blob))

    def tell(self, fp: str, told: Notice) -> None:
        for queue in self._subs.get(fp, ()):
            if not queue.full():  # a full queue already holds a wake-up; one more adds nothing
                queue.put_nowait(told)

    def streams(self, fp: str) -> int:
        return len(self._subs.get(fp, ()))

    def mailboxes(self) -> list[str]:
        """The mailboxes with at least one open stream here."""
        return list(self._subs)
