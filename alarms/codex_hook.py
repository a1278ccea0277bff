"""A hook door as its host runs it: `PYTHON -I -S .../alarms/codex_hook.py` for Codex
(`talk install codex`), and the same file as `.../alarms/gemini_hook.py` for Gemini CLI (a link
to this one): the name it is run under says whose hook it is.

Run by path and without site-packages, it puts the folder holding `alarms` on sys.path and drops
its own (`alarms/mailbox.py` would shadow the standard library's `mailbox`), then runs
`alarms.hosts.<host>.hook`. Nothing can be imported before that, so this is the one place the
path is set; only the standard library is loaded first: this runs on every turn.
"""

import os
import sys

HOSTS = {"codex_hook.py": "codex", "gemini_hook.py": "gemini"}

if __name__ == "__main__":
    here = os.path.dirname(os.path.abspath(__file__))
    if sys.path and os.path.abspath(sys.path[0] or ".") == here:
        sys.path.pop(0)
    if os.path.dirname(here) not in sys.path:
        sys.path.insert(0, os.path.dirname(here))
    import importlib

    host = HOSTS.get(os.path.basename(__file__), "codex")
    sys.exit(importlib.import_module(f"alarms.hosts.{host}.hook").main())
