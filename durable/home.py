"""Where talk keeps an identity's files: TALK_HOME (default ~/.talk), one folder per identity.

Only `os.path`: the hooks that run on every agent turn look an identity up here before they
load anything else.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

__all__ = ["IDENTITY_FILE", "identity_names", "talk_home"]

IDENTITY_FILE = "identity.json"


def talk_home(env: Mapping[str, str]) -> str:
    """TALK_HOME, else `.talk` in the home folder (both as `env` says)."""
    return env.get("TALK_HOME") or os.path.join(os.path.expanduser(env.get("HOME", "~")), ".talk")


def identity_names(home: str) -> list[str]:
    """The identities in `home`, by name (each a folder holding IDENTITY_FILE); none if no `home`."""
    try:
        names = os.listdir(home)
    except OSError:
        return []
    return sorted(n for n in names if os.path.isfile(os.path.join(home, n, IDENTITY_FILE)))
