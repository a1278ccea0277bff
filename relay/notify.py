"""Wake the push streams of a mailbox the moment mail lands in it.

`LocalHub` fans out inside one relay process; a store shared by several replicas brings a hub
that fans out across them. A notification says "look", and carries the stored blob with its id
when the blob is at most PUSH_BLOB_MAX bytes, so the owner opens it without fetching it again.
It is a copy only: the mail stays stored until the owner acks it, so a dropped or duplicated
notification costs a fetch, never a message.
"""

from __future__ import annotations

import asyncio
import json
from collections import deque
from typing import NamedTuple, Protocol

from keys.encoding import b64e

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

    def frame(self) -> str:
        """The stream's text frame for it: {"type": "mail", "tag": …}, with "id" and a base64
        "blob" when the blob rides along (`follower.relay.push` reads it)."""
        frame = {"type": "mail", "tag": self.tag}
        if self.mail_id:
            frame |= {"id": self.mail_id, "blob": b64e(self.blob)}
        return json.dumps(frame, separators=(",", ":"))


def notice(tag: str, mail_id: str, blob: bytes) -> Notice:
    """The notice for a stored blob: with the blob when it is small enough to push."""
    return Notice(tag, mail_id, blob) if mail_id and len(blob) <= PUSH_BLOB_MAX else Notice(tag)


class Wakeups:
    """One stream's notices, waiting to be sent, and the one task that sends them.

    Not an `asyncio.Queue`: a notice told here wakes the waiting task in one turn of the event
    loop (a queue's getter wrapped in a task and waited on beside the client's socket takes
    three), so a deposit that lets one turn run before it answers has its push written first:
    the owner's follower starts waking while the sender reads its answer."""

    def __init__(self, most: int = QUEUE_DEPTH) -> None:
        self._notices: deque[Notice] = deque()
        self._most = most
        self._waiter: asyncio.Future[None] | None = None

    def __len__(self) -> int:
        return len(self._notices)

    def tell(self, told: Notice) -> None:
        """Keep `told` for the stream; past `most` it is dropped (a full queue already holds a
        wake-up, so one more adds nothing)."""
        if len(self._notices) < self._most:
            self._notices.append(told)
        self.wake()

    def wake(self) -> None:
        """End the stream's `wait`, told or not (its client went away, say)."""
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    async def wait(self) -> None:
        """Until a notice waits, or `wake`."""
        if self._notices:
            return
        self._waiter = asyncio.get_running_loop().create_future()
        try:
            await self._waiter
        finally:
            self._waiter = None

    def take(self) -> list[Notice]:
        """The notices waiting, oldest first; none are kept."""
        taken = list(self._notices)
        self._notices.clear()
        return taken


class Hub(Protocol):
    tells_at_once: bool  # `publish` has reached this process's streams when it returns

    async def start(self) -> None:
        """Called once before the relay serves (a shared hub connects and subscribes here)."""
        ...

    async def stop(self) -> None: ...

    def subscribe(self, fp: str) -> Wakeups: ...

    async def ready(self, fp: str) -> None:
        """Return once mail deposited in `fp` from now on, through any replica, reaches the
        `Wakeups` that `subscribe` gave out here (a stream says "ready" only after this).

        Raises:
            StoreUnavailable: a shared hub could not listen for `fp` in time.
        """
        ...

    def unsubscribe(self, fp: str, queue: Wakeups) -> None: ...

    async def publish(self, fp: str, tag: str, mail_id: str = "", blob: bytes = b"") -> None:
        """Tell `fp`'s streams; with the blob when `notice` says it rides along."""
        ...

    def streams(self, fp: str) -> int: ...


class LocalHub:
    # A publish reaches this process's streams before it returns (`Relay.deposit` lets them
    # write their frames before it answers); a shared hub's go through its store first.
    tells_at_once = True

    def __init__(self) -> None:
        self._subs: dict[str, set[Wakeups]] = {}

    async def start(self) -> None:
        pass

    async def stop(self) -> None:
        pass

    def subscribe(self, fp: str) -> Wakeups:
        queue = Wakeups()
        self._subs.setdefault(fp, set()).add(queue)
        return queue

    async def ready(self, fp: str) -> None:
        pass  # one process: `publish` reaches every queue at once

    def unsubscribe(self, fp: str, queue: Wakeups) -> None:
        subs = self._subs.get(fp)
        if subs is not None:
            subs.discard(queue)
            if not subs:
                del self._subs[fp]

    async def publish(self, fp: str, tag: str, mail_id: str = "", blob: bytes = b"") -> None:
        self.tell(fp, notice(tag, mail_id, blob))

    def tell(self, fp: str, told: Notice) -> None:
        for queue in self._subs.get(fp, ()):
            queue.tell(told)

    def streams(self, fp: str) -> int:
        return len(self._subs.get(fp, ()))

    def mailboxes(self) -> list[str]:
        """The mailboxes with at least one open stream here."""
        return list(self._subs)
