"""Names for client addresses and mailboxes in the relay's log that do not reveal them.

A keyed BLAKE2b with a key drawn once per process: the same address reads the same all through
one run, so an operator can follow it across lines, yet the log alone cannot be matched against
a list of addresses or fingerprints (a plain hash could), nor compared across restarts.
"""

from __future__ import annotations

import os

from durable.digests import blake2b

_KEY = os.urandom(16)


def hide(value: str) -> str:
    """8 hex characters standing for `value` in this process's log."""
    return blake2b(value.encode(), digest_size=4, key=_KEY).hexdigest()
