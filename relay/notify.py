"""Wake the push streams of a mailbox the moment mail lands in it.

`LocalHub` fans out inside one relay process; a store shared by several replicas brings a hub
that fans out across them. A notification only says "look": the follower then fetches, so a
dropped or duplicated notification costs a fetch, never a message.
"""

from __future__ import annotations

import asyncio
from typing import Protocol

QUEUE_DEPTH = 64


class Hub(Protocol):
    async def start(self) -> None:
        """Called once before the relay serves (a shared hub connects and subscribes here)."""
        ...

    async def stop(self) -> None: ...

    def subscribe(self, fp: str) -> asyncio.Queue[str]: ...

    def unsubscribe(self, fp: str, queue: asyncio.Queue[str]) -> None: ...

    async def publish(self, fp: str, tag: str) -> None: ...

    def streams(self, fp: str) -> int: ...


class LocalHub:
    def __init__(self) -> None:
        self._subs: dict[str, set[asyncio.Queue[str]]] = {}

    async def start(self) -> None:
        pass

    async def stop(self) -> None:
        pass

    def subscribe(self, fp: str) -> asyncio.Queue[str]:
        queue: asyncio.Queue[str] = asyncio.Queue(QUEUE_DEPTH)
        self._subs.setdefault(fp, set()).add(queue)
        return queue

    def unsubscribe(self, fp: str, queue: asyncio.Queue[str]) -> None:
        subs = self._subs.get(fp)
        if subs is not None:
            subs.discard(queue)
            if not subs:
                del self._subs[fp]

    async def publish(self, fp: str, tag: str) -> None:
        for queue in self._subs.get(fp, ()):
            if not queue.full():  # a full queue already holds a wake-up; one more adds nothing
                queue.put_nowait(tag)

    def streams(self, fp: str) -> int:
        return len(self._subs.get(fp, ()))

    def mailboxes(self) -> list[str]:
        """The mailboxes with at least one open stream here."""
        return list(self._subs)
