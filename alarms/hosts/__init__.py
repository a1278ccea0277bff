"""One folder per agent host talk has a door into, each meeting the door contract (`alarms.door`)
and listed once in `alarms.registry`: its doors, its install and uninstall, its status, and its
plugin or extension files. Adding a host is a new folder here and one line in the registry.

The face (`__all__`): every host, as `alarms.registry` loads each. A host's own `__init__` is its
face (`alarms.door.HostPackage`; `alarms.host_face` does the rest): constants, and functions that
import the rest when called. It imports nothing at the top but its face's loader (`durable.faces`,
which needs only `sys`), because hooks load it on every turn. Its `__all__` lists the contract's
names and the modules others import (the old entry points in `alarms/`, and `talk door` for the
daemon doors); a door run as a program (`python -m alarms.hosts.claude.hook`) is not imported,
so it needs no place in it."""

from __future__ import annotations

from durable.faces import face

__all__ = ("claude", "codex", "copilot", "gemini", "opencode", "pi", "qwen")
__getattr__ = face(__name__, __all__)
