"""Gemini CLI's hook door as Gemini CLI runs it: `PYTHON -I -S .../alarms/gemini_hook.py`
(`talk install gemini`).

Run by path and without site-packages, it puts the folder holding `alarms` on sys.path and drops
its own (`alarms/mailbox.py` would shadow the standard library's `mailbox`), then runs
`alarms.hosts.gemini.hook`. Only the standard library is imported before that: this runs on every turn.
"""

import os
import sys

if __name__ == "__main__":
    here = os.path.dirname(os.path.abspath(__file__))
    if sys.path and os.path.abspath(sys.path[0] or ".") == here:
        sys.path.pop(0)
    if os.path.dirname(here) not in sys.path:
        sys.path.insert(0, os.path.dirname(here))
    from alarms.hosts.gemini.hook import main

    sys.exit(main())
