"""Each sender's mail reaches the agent in the order it came, files or not.

A message that announces files is parked until they are in (`follower.receive.parking`). Mail
its sender sent after it must not overtake it, so while a message of a sender is parked, that
sender's later mail that would be handed on is parked behind it (a parked message with no files:
the taker hands the parked mail of each sender on oldest first, `follower.files.taker`). Held
mail goes aside, not to the agent, so it waits behind nothing. Other senders' mail never waits.

`route` decides, from facts alone; `senders_waiting` is the one look at the disk it needs.
"""

from __future__ import annotations

import os
from enum import Enum
from pathlib import Path

__all__ = ["Route", "route", "senders_waiting"]


class Route(Enum):
    PARK = "park"  # it announces files: parked until they are in
    HOLD = "hold"  # its sender's policy holds it aside
    BEHIND = "behind"  # its sender has mail parked: it waits behind that, parked without files
    HAND_ON = "hand on"  # to the agent now


def route(announces_files: bool, held: bool, sender_waiting: bool) -> Route:
    """Where a judged, admitted message goes."""
    if announces_files:
        return Route.PARK
    if held:
        return Route.HOLD
    if sender_waiting:
        return Route.BEHIND
    return Route.HAND_ON


def senders_waiting(folder: Path) -> set[str]:
    """The fingerprints of the senders with mail parked in the identity folder `folder`. One
    listing when none is (`follower.files.parked`, not imported then: `talk receive` of one chat
    message runs on every agent turn)."""
    try:
        if not os.listdir(folder / "files" / "parked"):
            return set()
    except FileNotFoundError:
        return set()
    from follower.files.parked import Parked

    return {str(message.data.get("from")) for message in Parked(folder).waiting()}
