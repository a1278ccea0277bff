"""The one version of the whole project (the relay's /healthz and the MCP server report it):
the installed distribution's, as pyproject.toml gave it."""

from __future__ import annotations

__all__ = ["DISTRIBUTION", "UNINSTALLED", "version"]

import functools

DISTRIBUTION = "talk-mailbox"  # [project] name in pyproject.toml
UNINSTALLED = "0+unknown"  # a PEP 440 version no release has


@functools.cache
def version() -> str:
    # Imported here: importlib.metadata costs milliseconds, and most commands never ask.
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as installed

    try:
        return installed(DISTRIBUTION)
    except PackageNotFoundError:  # run from a source tree that was never installed: no metadata
        return UNINSTALLED
