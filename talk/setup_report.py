"""What `talk setup` found and did, host by host, and the one screen (or the JSON) it prints: pure,
from values `talk.setup_cli` gathered.

A host is *installed* for this user when its program is on PATH or its own folder is there (its
wiring is not `State.ABSENT`). For each: the wiring after setup, what wakes its sessions, the live
sessions registered now, and the one command for what is not done yet: the wiring's own fix, or
the command that opens a door setup cannot open itself (a daemon the user starts against something
only they know, as a server's URL). A host whose best door opens at launch also gets the command
that starts its sessions that way (`talk run HOST`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from alarms.wiring import State

__all__ = ["FollowerReport", "HostReport", "SetupReport", "by_hand", "launch_command", "needs_setup",
           "render", "to_json"]

WIDTH = 13  # a host's title column: the longest title and a space


@dataclass(frozen=True)
class HostReport:
    name: str
    title: str
    on_path: bool  # its program is on PATH
    state: State  # talk's wiring in it (after setup, when setup ran)
    detail: str
    fix: str  # the wiring's own fix, "" when none
    door: str  # what wakes its sessions (`Host.wakes`)
    installs: bool  # its install writes something (`Host.paths()`); else only a door to start
    start: str = ""  # the command that opens a door setup cannot open (by_hand)
    launch: str = ""  # the command that starts a session with its launch door open (`talk run`)
    sessions: tuple[str, ...] = ()  # its live sessions' ids
    failure: str = ""  # what its install said when it would not run, or failed
    reach: str = ""  # when a just-started session can take mail (the host's REACH)

    @property
    def installed(self) -> bool:
        return self.on_path or self.state is not State.ABSENT

    @property
    def todo(self) -> str:
        """The one command (or step) left for this host; "" when nothing is."""
        if self.failure:
            return self.fix or f"talk install {self.name}"
        if self.state is not State.WIRED and self.fix:
            return self.fix
        if self.start and self.state in (State.ABSENT, State.UNWIRED):
            return self.start
        return ""

    @property
    def label(self) -> str:
        if self.failure:
            return "failed"
        if self.start and self.state is State.ABSENT:
            return "door to start"
        return self.state.value


@dataclass(frozen=True)
class FollowerReport:
    running: bool
    pid: int | None = None
    started: bool = False  # setup started it (else it ran already, or could not start)
    said: str = ""
    fix: str = ""


@dataclass(frozen=True)
class SetupReport:
    identity: str
    hosts: Sequence[HostReport]
    follower: FollowerReport | None
    snapshot: str  # where the saved files are, for --undo
    warnings: Sequence[str] = field(default_factory=tuple)


def by_hand(name: str, required: Iterable[tuple[str, str, str]]) -> str:
    """The command that opens host `name`'s daemon door when setup cannot: `talk door NAME` with
    each option only the user knows (flag, metavar, help); "" when there is none."""
    given = list(required)
    if not given:
        return ""
    flags = " ".join(f"{flag} {metavar}" for flag, metavar, _ in given)
    told = "; ".join(f"{metavar}: {help_text.rstrip('.')}" for _, metavar, help_text in given)
    return f"talk door {name} {flags}  ({told})"


def launch_command(name: str) -> str:
    return f"talk run {name}"


def needs_setup(hosts: Iterable[HostReport]) -> list[HostReport]:
    """Installed hosts talk is not wired into though their install would write it (`talk doctor`)."""
    return [h for h in hosts if h.installed and h.installs and h.state in (State.ABSENT, State.UNWIRED)]


def _sessions(host: HostReport) -> str:
    if not host.sessions:
        return "no session yet"
    shown = ", ".join(host.sessions[:3]) + (f" +{len(host.sessions) - 3}" if len(host.sessions) > 3 else "")
    return f"{len(host.sessions)} live: {shown}"


def _follower_line(f: FollowerReport) -> str:
    line = f"follower: {f.said}"
    return line + (f"\n  to do: {f.fix}" if f.fix else "")


def render(report: SetupReport) -> str:
    """The one screen: the follower, then two or three lines per installed host."""
    lines = [f"talk setup for {report.identity}"]
    if report.follower is not None:
        lines.append(_follower_line(report.follower))
    shown = [h for h in report.hosts if h.installed]
    for h in shown:
        lines.append(f"{h.title:<{WIDTH}}{h.label:<16}{_sessions(h)}")
        lines.append(f"  door: {h.door}")
        if h.reach and not h.sessions:
            lines.append(f"  a new session takes mail {h.reach}")
        if h.launch:
            lines.append(f"  start its sessions with: {h.launch}")
        if h.failure:
            lines.append(f"  failed: {h.failure}")
        if h.todo:
            lines.append(f"  to do: {h.todo}")
    missing = [h.title for h in report.hosts if not h.installed]
    if not shown:
        lines.append("no agent host found: none of their programs is on PATH, nor any of their folders")
    if missing:
        lines.append(f"not found here: {', '.join(missing)}")
    lines.append(f"undo all of it: talk setup --undo (saved what it changed in {report.snapshot})")
    return "\n".join(lines)


def to_json(report: SetupReport) -> dict[str, Any]:
    hosts = [{"host": h.name, "title": h.title, "installed": h.installed, "on_path": h.on_path,
              "state": h.state.value, "detail": h.detail, "door": h.door, "sessions": list(h.sessions),
              "failure": h.failure or None, "todo": h.todo or None, "launch": h.launch or None,
              "reach": h.reach or None}
             for h in report.hosts]
    f = report.follower
    follower = None if f is None else {"running": f.running, "pid": f.pid, "started": f.started,
                                       "said": f.said, "todo": f.fix or None}
    return {"identity": report.identity, "follower": follower, "hosts": hosts, "snapshot": report.snapshot,
            "warnings": list(report.warnings)}
