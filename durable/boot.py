"""Which boot of this machine this is: what is written without a sync lasts at least that long.

A write that is not synced sits in the kernel's page cache, which every process reads and which
outlives any process, killed or not; only a crash of the kernel or a power loss can take it back,
and after either the machine boots again with a new boot id. So a file that records the boot it
was written in, and finds itself read in another, knows its unsynced writes may be gone.
"""

from __future__ import annotations

import functools
from pathlib import Path

__all__ = ["BOOT_ID_FILE", "boot_id"]

BOOT_ID_FILE = Path("/proc/sys/kernel/random/boot_id")


@functools.cache
def boot_id() -> str | None:
    """This boot's id (Linux); None where the system does not say, and then every write that
    matters must be synced."""
    try:
        found = BOOT_ID_FILE.read_text().strip()
    except OSError:
        return None
    return found or None
