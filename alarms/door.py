"""The door contract: what each agent host's package in `alarms/` tells the rest of talk.

A *host* is an agent program (Claude Code, Codex, ...); a *door* is one way peer mail enters a
session of it. A hook (a short process the host starts on its turns), a monitor, a daemon and an
extension are kinds of door. Each host's package, `alarms/hosts/<host>/`, meets `HostPackage` in
its `__init__`, which imports nothing at the top: hooks load it on every turn, and
`alarms.registry` loads it for the CLI. `alarms.host_face` makes it a `Host`: what every host does
alike (install, uninstall and `talk doctor`'s look, through the package's `install` module) is
written there once; the package has a function of its own only where it differs. A host whose
door is a daemon meets `DaemonHost` too.

What *delivered* means differs per host, so each host's `__init__` docstring says it: when the
door counts a message as handed to the model (`durable.receipt_states.Receipt.DELIVERED`).

Install code returns values (`Done`) and never prints: `talk install`/`talk uninstall` (in
`talk/`) print them, so `alarms/` imports only `spool_writer` and `durable`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from alarms.wiring import Wiring

__all__ = ["DaemonHost", "Done", "DoorOption", "Host", "HostPackage", "LaunchHost", "Option", "Request"]

# One host-specific option of `talk install HOST` / `talk uninstall HOST`:
# (flag, Request field it fills: "where" (a path) or "program", help text).
Option = tuple[str, str, str]
# One option of a daemon door's `talk door HOST` / `talk door stop HOST`: (flag, kind, metavar
# ("" for the default), help text). Kind: "text", "required" (text that must be given), "number",
# "path", or "switch" (off unless given). Its value reaches the door under the flag's name without
# the dashes, "-" as "_". Plain tuples: a host's package imports nothing at the top.
DoorOption = tuple[str, str, str, str]


@dataclass(frozen=True)
class Request:
    """What `talk install HOST` (or uninstall) was asked, and from which environment."""

    python: str  # the interpreter talk runs on: hooks run talk with it
    env: Mapping[str, str]
    user: str | None = None  # --user, else TALK_USER
    where: Path | None = None  # the host's own folder or config file, when not the default
    program: str | None = None  # the host's program, when installing must run it

    @property
    def talk_home(self) -> str | None:
        """TALK_HOME as given at install time, baked into what hooks run (None: the default)."""
        return self.env.get("TALK_HOME") or None

    @property
    def who(self) -> str | None:
        return self.user or self.env.get("TALK_USER") or None


@dataclass(frozen=True)
class Done:
    """What an install or uninstall did: `data` for --json, `said` for a person, `warnings` to
    print after it, and `failure` when it wrote something but the host will not run it yet (the
    command then exits non-zero with that message)."""

    data: dict[str, Any]
    said: str
    warnings: tuple[str, ...] = ()
    failure: str | None = None


class HostPackage(Protocol):
    """What a host's package `alarms/hosts/<host>/` says in its `__init__`. Besides: WAKES (the
    line for `wakes`) or its own `wakes(identity)`; its own `wiring(identity)` where the identity
    matters; `door_status` and `render_status` for a daemon door; its `install` module has
    `install`, `uninstall`, `paths` and `wiring()` (`alarms.host_face`)."""

    NAME: str  # `talk install NAME`, and the host a session registers under in the spool
    TITLE: str  # how people call it: "Claude Code"
    REACH: str  # when a just-started session can take mail: from its first second, or from when
    AUTHOR_ENV: tuple[str, ...]  # variables the host sets in its tools' environment: "runs inside it"
    PROCESS_NAMES: tuple[str, ...]  # the host program's process names (`alarms.mailbox.host_pid`)
    PROGRAM: str  # the host's program as found on PATH: `talk setup` takes it as the host being there
    OPTIONS: tuple[Option, ...]  # host-specific options of `talk install/uninstall NAME`
    INSTALL_HELP: str  # what `talk install NAME` does, for its --help
    UNINSTALL_HELP: str


class Host(HostPackage, Protocol):
    """One agent host, as talk uses it (`alarms.registry.host_of`)."""

    # Not plain `install`: the package's `install` module, once imported, would take that name.
    def install_doors(self, request: Request) -> Done:
        """Wire talk into the host; running it twice changes nothing. UserError when it cannot."""

    def uninstall_doors(self, request: Request) -> Done:
        """Remove exactly what `install` wrote and nothing of the user's own; idempotent."""

    def wiring(self, identity: Path | None) -> Wiring:
        """How far talk is wired into the host (`talk doctor`); reads only. `identity` is the
        identity's folder when there is one (a daemon door keeps its state there)."""

    def paths(self) -> list[Path]:
        """What `install` writes into the host's folders, for `talk doctor`'s permission check."""

    def wakes(self, identity: Path | None) -> str:
        """What brings mail into a session of this host, one line for `talk status`."""

    def door_status(self, identity: Path) -> tuple[str, Any] | None:
        """A daemon door's state for `talk status --json` (its key and value), None without one."""

    def render_status(self, report: Mapping[str, Any]) -> list[str]:
        """A daemon door's lines in `talk status`, from the report `door_status` filled its key of."""


class DaemonHost(Protocol):
    """A host whose door is a daemon that `talk door HOST` starts and `talk door stop HOST`
    stops, as its package says (`alarms.registry.daemon_hosts` finds them: those with `start_door`)."""

    NAME: str
    TITLE: str
    START_HELP: str  # what `talk door NAME` does, for its --help
    STOP_HELP: str
    START_OPTIONS: tuple[DoorOption, ...]
    STOP_OPTIONS: tuple[DoorOption, ...]

    def start_door(self, folder: Path, given: Mapping[str, Any]) -> Done | int:
        """Start the door for the identity in `folder` (or say the one running); `given` holds
        START_OPTIONS by key. An int: the door ran in this process (--foreground), its exit status."""

    def stop_door(self, folder: Path, given: Mapping[str, Any]) -> Done:
        """Stop the identity's door (or doors, as STOP_OPTIONS narrow it); its mail stays."""


class LaunchHost(Protocol):
    """A host whose best door must be opened when the session starts (a launch flag): `talk run
    NAME ARGS…` starts the host with that door open and every other argument passed through
    (`alarms.registry.launch_hosts` finds them: those with `run_session`). A session started
    without it keeps the host's other doors."""

    NAME: str
    TITLE: str
    RUN_HELP: str  # what `talk run NAME` does, for its --help
    RUN_OPTIONS: tuple[DoorOption, ...]  # talk's own options of `talk run NAME`, before the host's

    def run_session(self, folder: Path, args: Sequence[str], env: Mapping[str, str],
                    given: Mapping[str, Any]) -> int:
        """Run the host in this terminal with the door open for the identity in `folder`, `args`
        passed to the host as given, `given` holding RUN_OPTIONS by key; the host's exit status.
        UserError when it cannot start."""
