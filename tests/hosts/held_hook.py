"""Run one of talk's hooks as its host would, but hold it once it has taken mail, to be killed there.

    PYTHON -I -S held_hook.py HOLD SCRIPT ARGS...   runs as `PYTHON -I -S SCRIPT ARGS...` (Codex)
    PYTHON -I held_hook.py HOLD -m MODULE ARGS...   runs as `PYTHON -I -m MODULE ARGS...` (Claude Code)

Both hooks take mail through `alarms.handover.take`, which records the batch as pending and moves
the session's cursor before it returns; the hook prints its answer after. Wrapped here, a `take`
that returned mail writes this process's id to the file HOLD (atomically) and then sleeps instead
of returning: the test waits for HOLD, so it knows the batch is recorded, the cursor moved and
nothing printed, and SIGKILLs the pid in it. A `take` that found nothing returns at once, and so
does any take once HOLD exists (one hold per file), so the session's other hook runs, the ones
after the kill included, go through unchanged.
"""

from __future__ import annotations

import os
import runpy
import sys
import time
from typing import Any

HOLD_S = 120.0  # the test kills it long before; bounded so a failed test leaves nothing behind


def hold_after_take(hold: str) -> None:
    """Wrap `alarms.handover.take` so that, once it returned mail, it holds until killed."""
    from alarms import handover

    take = handover.take

    def held(*args: Any, **kwargs: Any) -> Any:
        records = take(*args, **kwargs)
        if records and not os.path.exists(hold):
            part = f"{hold}.{os.getpid()}.part"
            with open(part, "w") as f:
                f.write(str(os.getpid()))
            os.replace(part, hold)
            time.sleep(HOLD_S)
        return records

    handover.take = held


def main(argv: list[str]) -> None:
    hold, target, *rest = argv
    if target == "-m":
        module, *args = rest
        hold_after_take(hold)
        sys.argv = [module, *args]
        runpy.run_module(module, run_name="__main__", alter_sys=True)
    else:
        # As the script would find `alarms` itself: the folder above its own (before importing it).
        sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(target))))
        hold_after_take(hold)
        sys.argv = [target, *rest]
        runpy.run_path(target, run_name="__main__")


if __name__ == "__main__":
    main(sys.argv[1:])
