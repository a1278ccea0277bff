"""The opencode-mesh fields every part checks the same way: a task id's shape, the modes a task
runs in, the statuses a result reports.

`keys` refuses a peer's message whose fields are not of these shapes; a door checks a spool
line against them again before it shows the line to an agent (a spool line is a file on disk).
They are plain text shapes with no keys or crypto in them, so they sit below both.
"""

from __future__ import annotations

import re

__all__ = ["MARKERS", "MODES", "STATUSES", "TASK_ID", "is_task_id", "may_carry_block"]

# The names a block's tag starts with (`[opencode-mesh v1]`, `[aoi-mesh-result v1]`, ...).
MARKERS = ("opencode-mesh", "aoi-mesh")
MODES = ("one-shot", "session", "resume")
STATUSES = ("done", "partial", "failed")
# Task ids: talk writes `<node>-<base36>-<rand>`; other nodes may use other letters, dots or
# colons. No blanks, nothing a shell or a header could read as something else: an agent is shown
# the id outside the quote, in a `talk reply ID` command it may run.
TASK_ID = re.compile(r"\w[\w.:-]{0,127}")


def is_task_id(value: object) -> bool:
    return isinstance(value, str) and TASK_ID.fullmatch(value) is not None


def may_carry_block(text: str) -> bool:
    """False when `text` has no block's tag in it: then it is plain chat, and the block parser
    (`follower.tasks.mesh`) need not even be loaded."""
    return any(marker in text for marker in MARKERS)
