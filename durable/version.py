"""The one version of the whole project (the relay's /healthz and the MCP server report it):
the installed distribution's, as pyproject.toml gave it.

Read from the distribution's own METADATA file, found the way an installer names it
(`talk_mailbox-VERSION.dist-info` on sys.path): importlib.metadata would cost a relay about a
megabyte of modules (zipfile, csv, the email parser) for as long as it serves, for one line.
Anything else (an egg, a zipped path) is left to importlib.metadata.
"""

from __future__ import annotations

__all__ = ["DISTRIBUTION", "UNINSTALLED", "version"]

import functools
import os
import sys

DISTRIBUTION = "talk-mailbox"  # [project] name in pyproject.toml
UNINSTALLED = "0+unknown"  # a PEP 440 version no release has
VERSION_FIELD = "Version: "


@functools.cache
def version() -> str:
    found = _dist_info_version(DISTRIBUTION, sys.path)
    if found is not None:
        return found
    # Imported here: importlib.metadata costs milliseconds, and most commands never ask.
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as installed

    try:
        return installed(DISTRIBUTION)
    except PackageNotFoundError:  # run from a source tree that was never installed: no metadata
        return UNINSTALLED


def _dist_info_version(distribution: str, path: list[str]) -> str | None:
    """The Version field of the first `NAME-*.dist-info/METADATA` in `path`'s folders."""
    prefix = distribution.replace("-", "_") + "-"  # how wheels and pip name the folder
    for folder in path:
        try:
            names = sorted(os.listdir(folder or "."))
        except OSError:  # not a folder (a zip), or gone
            continue
        for name in names:
            if name.startswith(prefix) and name.endswith(".dist-info"):
                return _version_field(os.path.join(folder or ".", name, "METADATA"))
    return None


def _version_field(metadata: str) -> str | None:
    try:
        with open(metadata, encoding="utf-8") as lines:
            for line in lines:
                if line.startswith(VERSION_FIELD):
                    return line[len(VERSION_FIELD):].strip()
                if line in ("\n", "\r\n"):  # the headers end; the long description follows
                    return None
    except OSError:
        return None
    return None
