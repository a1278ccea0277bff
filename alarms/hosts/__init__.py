"""One folder per agent host talk has a door into, each meeting the door contract (`alarms.door`)
and listed once in `alarms.registry`: its doors, its install and uninstall, its status, and its
plugin or extension files. Adding a host is a new folder here and one line in the registry.

The face (`__all__`): every host, as `alarms.registry` loads each. A host's own face lists only
the modules others import (the old entry points in `alarms/`, and `talk alarm` for the daemon
doors); a door run as a program (`python -m alarms.hosts.claude.hook`) is not imported, so it
needs no place in it."""

from __future__ import annotations

from durable.faces import face

__all__ = ("claude", "codex", "copilot", "gemini", "opencode", "pi", "qwen")
__getattr__ = face(__name__, __all__)
