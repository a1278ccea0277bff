"""The mark a message left queued leaves in its identity folder (`follower.send.outbox.Outbox.queued`).

One stat of it tells `talk send` and `talk receive` whether anything waits to be deposited,
before the outbox or the sending machinery is loaded.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["QUEUED_MARK", "anything_queued"]

# Present while some message is queued (the relay did not take it): the next command that talks
# to the relay sends it, after one look at this file instead of a read of the whole outbox.
QUEUED_MARK = "outbox.queued"


def anything_queued(folder: Path) -> bool:
    return os.path.exists(folder / QUEUED_MARK)
