"""The relay's wall clock: the system's, unless the relay was started with a test clock.

Expiry is decided on this clock: undelivered mail's TTL, invite slots, the time window of signed
requests and owner sessions. A test that must see mail expire would otherwise sleep through the
TTL; instead it starts the relay with `TALK_RELAY_TEST_CLOCK` naming a file, writes a number of
seconds into that file, and the relay's clock runs that far ahead of the system's. Only whoever
starts the relay process sets its environment, so no client can move the clock; unset (always,
in service) the clock is `time.time` itself and no file is ever read.

Rate limits measure intervals on `time.monotonic` and are not moved by this clock.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

TEST_CLOCK_ENV = "TALK_RELAY_TEST_CLOCK"

Clock = Callable[[], float]


def relay_clock(environ: Mapping[str, str]) -> Clock:
    """`time.time`, or the offset clock the environment names for a test."""
    path = environ.get(TEST_CLOCK_ENV)
    if not path:
        return time.time
    return OffsetClock(Path(path))


def parse_offset(text: str) -> float:
    """The seconds a test clock file holds; empty is 0. Raises ValueError on anything else."""
    if not text.strip():
        return 0.0
    offset = float(text)
    if not math.isfinite(offset):
        raise ValueError(f"a test clock offset must be a finite number of seconds, not {text!r}")
    return offset


@dataclass(frozen=True)
class OffsetClock:
    """The system's time plus the seconds in `path`, read at every call (a missing file: 0)."""

    path: Path

    def __call__(self) -> float:
        try:
            text = self.path.read_text()
        except FileNotFoundError:
            text = ""
        return time.time() + parse_offset(text)
