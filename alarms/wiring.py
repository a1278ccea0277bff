"""How far talk is wired into an agent host, as `talk doctor` reports it.

Each `talk install HOST` module knows what it writes and where, so each exports a `wiring(...)`
that reads the host's own config (never writes it) and answers with one `Wiring`. The helpers
here are what those share: reading a config that may be corrupt, telling a hook's command whose
program is gone, and judging a set of hook handlers found per event. Nothing here knows a host.

A host that is not there at all (no config folder) is not a problem, and neither is a host talk
was never wired into: only half-wired, stale, untrusted or unreadable wiring is.
"""

from __future__ import annotations

import os
import shlex
import shutil
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

from durable.errors import UserError

__all__ = ["State", "Wiring", "guarded", "judge_hooks", "missing_program", "with_mcp_server"]


class State(StrEnum):
    ABSENT = "not installed"  # no config folder: the host is not used here
    UNWIRED = "not wired"  # the host is there, talk was never installed into it
    WIRED = "wired"
    INCOMPLETE = "incomplete"  # some of talk's entries are missing or switched off
    UNTRUSTED = "untrusted"  # written, but the host skips it until the user approves it
    UNREADABLE = "unreadable"  # the host's config is corrupt: the host may not load it either
    STALE = "stale"  # talk's entry runs a program that is gone: it fails on every turn


STATUS = {State.ABSENT: "ok", State.UNWIRED: "ok", State.WIRED: "ok", State.INCOMPLETE: "warn",
          State.UNTRUSTED: "warn", State.UNREADABLE: "warn", State.STALE: "fail"}


@dataclass(frozen=True)
class Wiring:
    host: str
    state: State
    detail: str
    fix: str = ""

    @property
    def status(self) -> str:
        return STATUS[self.state]

    @property
    def talk_written(self) -> bool:
        """talk wrote something into this host (whole or not): neither absent nor never wired."""
        return self.state not in (State.ABSENT, State.UNWIRED)


def guarded(host: str, again: str, where: Path, judge: Callable[[], Wiring]) -> Wiring:
    """`judge()`, or UNREADABLE with the file named when a host's config cannot be read or has a
    shape the host would refuse (judges read with `host_config.read_config`, which raises
    UserError naming the file, and raise ValueError for a shape found in `where`)."""
    try:
        return judge()
    except UserError as exc:
        return Wiring(host, State.UNREADABLE, exc.message, again)
    except ValueError as exc:
        return Wiring(host, State.UNREADABLE, f"{where}: {exc}", again)


def missing_program(command: str | list[str], env: Mapping[str, str] | None = None) -> str | None:
    """The program or script a hook's command names that is not there any more, or None.

    The program is looked up as the shell would (absolute path, else PATH); a `.py` argument is
    a script talk installed by path, so it must exist too.
    """
    try:
        argv = shlex.split(command) if isinstance(command, str) else list(command)
    except ValueError:
        return str(command)
    if not argv or not argv[0]:
        return "(an empty command)"
    program = argv[0]
    path = (env or os.environ).get("PATH")
    if os.sep in program:
        if not (os.path.isfile(program) and os.access(program, os.X_OK)):
            return program
    elif shutil.which(program, path=path) is None:
        return program
    return next((a for a in argv[1:] if a.endswith(".py") and not os.path.isfile(a)), None)


def judge_hooks(host: str, found: Mapping[str, list[str]], events: Iterable[str], again: str,
                where: Path) -> Wiring:
    """From talk's hook commands found per event in `where`: UNWIRED when there are none, STALE
    when one runs a program that is gone, INCOMPLETE when an event has none, else WIRED."""
    events = list(events)
    commands = [c for e in events for c in found.get(e, [])]
    if not commands:
        return Wiring(host, State.UNWIRED, f"talk is not installed ({where} has no talk hook)")
    gone = next((g for g in map(missing_program, commands) if g), None)
    if gone:
        return Wiring(host, State.STALE, f"talk's hook in {where} runs {gone}, which is gone", again)
    missing = [e for e in events if not found.get(e)]
    if missing:
        return Wiring(host, State.INCOMPLETE, f"no talk hook for {', '.join(missing)} in {where}", again)
    return Wiring(host, State.WIRED, f"hooks for {', '.join(events)} in {where}")


def with_mcp_server(hooks: Wiring, entry: Any, where: Path, again: str) -> Wiring:
    """`hooks` (a host's hook wiring) joined with talk's MCP server `entry` from `where`: a
    missing entry makes wired hooks INCOMPLETE, an entry whose program is gone STALE."""
    if hooks.state is not State.WIRED:
        return hooks
    if not isinstance(entry, dict):
        return Wiring(hooks.host, State.INCOMPLETE, f"no talk MCP server in {where}", again)
    command = [str(entry.get("command", "")), *map(str, entry.get("args") or [])]
    gone = missing_program(command)
    if gone:
        return Wiring(hooks.host, State.STALE, f"talk's MCP server in {where} runs {gone}, which is gone",
                      again)
    return Wiring(hooks.host, State.WIRED, f"{hooks.detail}; MCP server in {where}")
