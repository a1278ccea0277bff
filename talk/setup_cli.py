"""`talk setup [--undo]`: wire talk into every agent host installed here and start the follower, in
one command; `--undo` takes back what it did.

Thin: each host is installed as `talk install HOST` installs it (the same `Host.install_doors`
and `Request`), the follower started as `talk follow` starts it, and what to print is decided in
`talk.setup_report`. Before a host's install runs, what each path it writes held is saved in the
identity's folder (`SETUP_FILE`, `talk.config_snapshot`), so undo can leave every host config
as it was. What setup did is recorded there too: the hosts it wired (not one wired before it) and
the follower it started, which are what undo uninstalls and stops.
"""

from __future__ import annotations

import os
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from alarms.wiring import State
from talk.config_snapshot import (
    ABSENT,
    Entry,
    Kind,
    Restore,
    Seen,
    apply,
    load_entries,
    look,
    remember,
    restore_action,
    save_entries,
)
from talk.options import Json, User
from talk.output import emit_json, result, say, warn
from talk.setup_report import (
    FollowerReport,
    HostReport,
    SetupReport,
    by_hand,
    launch_command,
    render,
    to_json,
)

if TYPE_CHECKING:
    from alarms.door import Host, Request

__all__ = ["SETUP_FILE", "setup", "survey"]

SETUP_FILE = "setup.json"
FORMAT = 1


@dataclass
class Record:
    """What setup did, in the identity's folder: the hosts it installed (True: not wired before it,
    so undo uninstalls it), the follower it started, and the saved paths."""

    hosts: dict[str, bool] = field(default_factory=dict)
    follower_pid: int | None = None
    entries: dict[str, Entry] = field(default_factory=dict)

    @classmethod
    def load(cls, folder: Path) -> Record | None:
        from durable.errors import UserError
        from durable.files import read_json

        path = folder / SETUP_FILE
        raw = read_json(path, None)
        if raw is None:
            return None
        try:
            hosts = {str(k): bool(v) for k, v in raw["hosts"].items()}
            pid = raw.get("follower_pid")
            return cls(hosts, pid if isinstance(pid, int) else None, load_entries(raw["files"]))
        except (TypeError, KeyError, ValueError, AttributeError) as exc:
            raise UserError(f"{path} is damaged ({exc}); move it aside, then run talk setup again") from exc

    def save(self, folder: Path) -> None:
        from durable.files import write_json

        write_json(folder / SETUP_FILE, {"format": FORMAT, "hosts": self.hosts, "follower_pid":
                                         self.follower_pid, "files": save_entries(self.entries)})


def survey(folder: Path | None) -> list[HostReport]:
    """Every host of the registry as it is now: installed here?, wired?, its live sessions."""
    from alarms.registry import daemon_hosts, hosts, launch_hosts
    from spool_writer.sessions import list_sessions

    live = [s for s in list_sessions(folder / "spool") if s.alive] if folder is not None else []
    required = {h.NAME: [(flag, metavar or "VALUE", text) for flag, kind, metavar, text in h.START_OPTIONS
                         if kind == "required"] for h in daemon_hosts()}
    launched = {h.NAME for h in launch_hosts()}
    reports = []
    for host in hosts():
        wiring = host.wiring(folder)
        reports.append(HostReport(
            host.NAME, host.TITLE, shutil.which(host.PROGRAM) is not None, wiring.state, wiring.detail,
            wiring.fix, host.wakes(folder), bool(host.paths()),
            by_hand(host.NAME, required.get(host.NAME, [])),
            launch_command(host.NAME) if host.NAME in launched else "",
            tuple(s.sid for s in live if str(s.host) == host.NAME), reach=host.REACH))
    return reports


def _request(user: str | None) -> Request:
    from alarms.door import Request

    return Request(python=sys.executable, env=dict(os.environ), user=user)


def _install(host: Host, request: Request) -> tuple[str, tuple[str, ...]]:
    """Install `host` as `talk install` does: what failed ("" when nothing) and its warnings."""
    from durable.errors import TalkError

    try:
        done = host.install_doors(request)
    except TalkError as exc:
        return exc.message, ()
    return done.failure or "", tuple(f"{host.TITLE}: {w}" for w in done.warnings)


def _follower(folder: Path, user: str | None, ours: int | None) -> FollowerReport:
    """The follower running, or started now as `talk follow` starts it (every contact)."""
    from durable.errors import TalkError
    from follower.daemon.state import running_pid
    from talk.context import open_account
    from talk.follow_cli import start_following

    pid = running_pid(folder)
    if pid:
        whose = "started by talk setup" if pid == ours else "already running"
        return FollowerReport(True, pid, False, f"{whose} (pid {pid})")
    account = open_account(user, None, None)
    try:
        pid, _, said, _ = start_following(account, [], 30.0, True, None)
    except TalkError as exc:
        fix = "talk follow --passphrase-file PATH" if account.record.protected else "talk follow"
        return FollowerReport(False, None, False, f"not started: {exc.message}", fix)
    return FollowerReport(True, pid, True, f"started: {said}")


def run_setup(folder: Path, name: str, user: str | None) -> SetupReport:
    from alarms.registry import host_of

    record = Record.load(folder) or Record()
    saved = dict(record.entries)
    request = _request(user)
    found = [h for h in survey(folder) if h.installed]
    before = {h.name: {str(p): look(p) for p in host_of(h.name).paths()} for h in found}
    for h in found:  # saved before anything is written: a setup that dies halfway can still be undone
        record.hosts.setdefault(h.name, h.state is not State.WIRED)
        for path, seen in before[h.name].items():
            record.entries.setdefault(path, Entry(seen, None))
    record.save(folder)
    failures: dict[str, str] = {}
    warnings: list[str] = []
    for h in found:
        host = host_of(h.name)
        failures[h.name], said = _install(host, request)
        warnings += said
        # a path install names only now (a file of a folder it made) was not there before
        for path in {*before[h.name], *map(str, host.paths())}:
            was = before[h.name].get(path, ABSENT)
            record.entries[path] = remember(saved.get(path), was, look(Path(path)))
    follower = _follower(folder, user, record.follower_pid)
    if follower.started or (follower.pid is not None and follower.pid == record.follower_pid):
        record.follower_pid = follower.pid
    record.save(folder)
    after = [_with_failure(h, failures.get(h.name, "")) for h in survey(folder)]
    return SetupReport(name, after, follower, str(folder / SETUP_FILE), tuple(warnings))


def _with_failure(h: HostReport, failure: str) -> HostReport:
    from dataclasses import replace

    return replace(h, failure=failure) if failure else h


@dataclass(frozen=True)
class Undone:
    uninstalled: list[str]
    stopped: int | None
    restored: list[str]  # written back as they were
    removed: list[str]  # absent before setup, and gone again
    kept: list[str]  # changed since setup: the uninstall's result stays
    left: list[str]  # folders setup made that hold something now
    failed: list[str]


def run_undo(folder: Path, record: Record, user: str | None) -> Undone:
    from alarms.registry import NAMES, host_of
    from durable import daemon
    from durable.errors import TalkError
    from follower.daemon.state import running_pid

    at_undo = {path: look(Path(path)) for path in record.entries}
    uninstalled, failed = [], []
    for name in [n for n in NAMES if record.hosts.get(n)]:
        host = host_of(name)
        try:
            host.uninstall_doors(_request(user))
            uninstalled.append(host.TITLE)
        except TalkError as exc:
            failed.append(f"{host.TITLE}: {exc.message}")
    stopped = None
    pid = running_pid(folder)
    if pid and pid == record.follower_pid:
        daemon.stop([pid], lambda: bool(running_pid(folder)), f"follower (pid {pid})")
        stopped = pid
    restored, kept, left = _restore(record.entries, at_undo)
    (folder / SETUP_FILE).unlink(missing_ok=True)
    removed = [p for p in restored if record.entries[p].before.kind is Kind.ABSENT]
    back = [p for p in restored if p not in removed]
    return Undone(uninstalled, stopped, back, removed, kept, left, failed)


def _restore(entries: dict[str, Entry], at_undo: dict[str, Seen]) -> tuple[list[str], list[str], list[str]]:
    """Each saved path as it was: folders to make first (outermost first), then files, then folders
    to remove (innermost first)."""
    plan = {path: restore_action(e, at_undo[path], look(Path(path)), Path(path).suffix)
            for path, e in entries.items()}
    restored, kept, left = [], [], []
    depth = {p: len(Path(p).parts) for p in plan}
    made = sorted((p for p in plan if plan[p] is not Restore.REMOVE_DIR), key=depth.__getitem__)
    gone = sorted((p for p in plan if plan[p] is Restore.REMOVE_DIR), key=depth.__getitem__, reverse=True)
    for path in made + gone:
        action = plan[path]
        if action is Restore.KEPT:
            kept.append(path)
        elif action is not Restore.SAME and not apply(Path(path), action, entries[path].before):
            left.append(path)
        elif action is Restore.PUT_BACK:
            restored.append(path)
    return restored, kept, left


def _undone_text(done: Undone) -> str:
    lines = [f"uninstalled talk from {', '.join(done.uninstalled)}" if done.uninstalled
             else "no host to uninstall (each was wired before talk setup)"]
    if done.stopped:
        lines.append(f"stopped the follower talk setup started (pid {done.stopped})")
    if done.restored or done.removed:
        lines.append(f"put back {len(done.restored)} file(s) as they were before talk setup, removed "
                     f"{len(done.removed)} it had made")
    else:
        lines.append("every host file was already as it was before talk setup")
    lines += [f"kept {p}: changed since talk setup, so it stays as the uninstall left it" for p in done.kept]
    lines += [f"left folder {p}: talk setup made it, but it holds other files now" for p in done.left]
    lines += [f"could not uninstall {line}" for line in done.failed]
    return "\n".join(lines)


def setup(
    undo: Annotated[bool, typer.Option("--undo", help="Take back what talk setup did: uninstall the hosts "
                                       "it wired, stop the follower it started, and put each host config "
                                       "file back as it was.")] = False,
    user: User = None, as_json: Json = False,
) -> None:
    """Wire talk into every agent host installed here (as talk install HOST does), start the follower,
    and show per host what wakes its sessions and what is left to do."""
    from alarms.host_files import private_umask
    from durable.errors import NotFound, UserError
    from keys import keystore
    from talk.context import identity_record

    private_umask()
    try:
        me = identity_record(user)
    except NotFound as exc:
        first = exc.message.partition(";")[0]
        raise UserError(f"{first}: run `talk init NAME` first, then `talk setup`") from exc
    folder = keystore.talk_home() / me.name
    if undo:
        record = Record.load(folder)
        if record is None:
            result({"undone": False}, "talk setup has not run for this identity: nothing to undo", as_json)
            return
        done = run_undo(folder, record, user)
        result({"undone": True, **done.__dict__}, _undone_text(done), as_json)
        return
    report = run_setup(folder, me.name, user)
    if as_json:
        emit_json(to_json(report))
    else:
        say(render(report))
    for line in report.warnings:
        warn(line)
    if any(h.failure for h in report.hosts):
        raise typer.Exit(1)

