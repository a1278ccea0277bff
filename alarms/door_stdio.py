"""A door process's two streams: stdout carries what its host reads (one line, flushed at once:
the host acts on each line as it comes), stderr one line per diagnostic, named for the door.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

__all__ = ["emit_stdout", "teller"]


def emit_stdout(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def teller(door: str) -> Callable[[str], None]:
    """`say` for the door named `door`: "talk <door>: <message>" on stderr, flushed."""

    def say(message: str) -> None:
        sys.stderr.write(f"talk {door}: {message}\n")
        sys.stderr.flush()

    return say
