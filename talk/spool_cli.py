"""`talk session …`, `talk gc` and `talk log`: the spool's commands, wiring only."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from alarms.registry import NAMES as HOST_NAMES
from alarms.registry import OTHER as OTHER_HOST
from durable.errors import UserError
from spool_writer.record import SpoolRecord
from talk.help_format import TalkTyper
from talk.options import Json, User
from talk.output import emit_json, result, warn

if TYPE_CHECKING:
    from talk.spool_log import SpoolLog

POLL_S = 0.2

session_app = TalkTyper(
    help="Agent sessions: each registered session gets its own copy of new mail.",
    no_args_is_help=True,
)


def spool_root(user: str | None) -> Path:
    from talk.context import open_account

    return open_account(user, None, None).folder / "spool"


def host_process(host: str) -> int:
    """The host program this command runs under, found among its ancestors: the shell that runs
    `talk` ends at once, and a session registered with its pid would be gone as it began.

    Raises:
        UserError: no ancestor runs the host (or the host is "other"): pass --pid.
    """
    from alarms.mailbox import find_host_pid
    from alarms.registry import OTHER, host_of

    found = None if host == OTHER else find_host_pid(host_of(host).PROCESS_NAMES)
    if found is None:
        raise UserError(f"no {host} process runs above this command; pass the host "
                        "program's pid with --pid")
    return found


@session_app.command("register")
def register_command(
    host: Annotated[str, typer.Option("--host", metavar="|".join((*HOST_NAMES, OTHER_HOST)),
                                      help="The agent program this session runs in.")],
    sid: Annotated[str, typer.Option(
        "--id", metavar="ID", help="The session's id (letters, digits, '.', '_', '-').")],
    pid: Annotated[
        int | None,
        typer.Option("--pid", metavar="PID", help="Pid of the host program; the session lives while it "
                      "runs (default: the nearest process above this one running the host)."),
    ] = None,
    user: User = None, as_json: Json = False,
) -> None:
    """Give a session its own copy of new mail (and the inbox's waiting mail) while its host runs."""
    from alarms.registry import parse_host
    from spool_writer.sessions import register

    host = parse_host(host)
    reg = register(spool_root(user), host, sid, host_process(host) if pid is None else pid)
    took = f"; took over {reg.took_over} waiting message(s) from the inbox" if reg.took_over else ""
    result(
        {"sid": reg.sid, "host": reg.host, "pid": reg.pid, "spool": str(reg.spool),
         "took_over": reg.took_over},
        f"registered session {reg.sid} ({reg.host}, pid {reg.pid}){took}\nspool: {reg.spool}",
        as_json,
    )


@session_app.command("unregister")
def unregister_command(
    sid: Annotated[str | None, typer.Option(
        "--id", metavar="ID", help="The session's id, as register took it.")] = None,
    positional: Annotated[str | None, typer.Argument(
        metavar="ID", help="The session's id (older form of --id).", show_default=False)] = None,
    user: User = None, as_json: Json = False,
) -> None:
    """Remove a session; its unread mail goes back to the inbox for the next session."""
    from durable.errors import UserError
    from spool_writer.sessions import unregister

    if (sid is None) == (positional is None):
        raise UserError("name the session once: talk session unregister --id ID (see talk session list)")
    sid = sid or positional
    assert sid is not None
    moved = unregister(spool_root(user), sid)
    result({"sid": sid, "moved": moved},
           f"unregistered session {sid}; {moved} unread message(s) moved to the inbox", as_json)


@session_app.command("list")
def list_command(user: User = None, as_json: Json = False) -> None:
    """List the registered sessions: host, pid, whether it still runs, unread mail."""
    from spool_writer.sessions import list_sessions

    root = spool_root(user)
    rows = [{"sid": s.sid, "host": s.host, "pid": s.pid, "alive": s.alive, "spool": str(s.spool),
             "unread": s.unread} for s in list_sessions(root)]
    if as_json:
        emit_json(rows)
        return
    if not rows:
        result({}, f"no sessions registered; new mail waits in {root / 'inbox.ndjson'}", False)
    for row in rows:
        state = "running" if row["alive"] else "gone"
        result({}, f"{row['sid']:<24} {row['host']:<9} pid {row['pid']:<8} {state:<8} "
                   f"{row['unread']} unread  {row['spool']}", False)


def gc_command(
    idle_days: Annotated[
        float, typer.Option(
            "--idle-days", min=0, metavar="DAYS", help="Retire sessions unused for this many days.")
    ] = 14.0,
    user: User = None, as_json: Json = False,
) -> None:
    """Remove the spools of sessions that are gone or long idle; their unread mail goes to the inbox."""
    from spool_writer.sessions import gc

    actions = gc(spool_root(user), idle_days)
    result({"actions": actions}, "\n".join(actions) or "nothing to clean up", as_json)


def log_command(
    session: Annotated[
        str | None, typer.Option(
            "--session", metavar="ID", help="Only this session's spool (default: all and the inbox).")
    ] = None,
    follow: Annotated[
        bool, typer.Option("--follow", "-f", help="Keep printing new mail until Ctrl-C.")
    ] = False,
    user: User = None,
) -> None:
    """Show the mail in the spool for a person: time, short id, sender, kind, text. Reads without
    moving any cursor; damaged lines are named on stderr and skipped."""
    from talk.spool_log import SpoolLog

    files = _log_files(spool_root(user), session)
    log = SpoolLog()
    if not _show(log, files()) and not follow:
        warn("no mail in the spool (mail taken with `talk receive` never goes there: `talk show` lists it)")
    if not follow:
        return
    try:
        while True:
            time.sleep(POLL_S)
            _show(log, files())
    except KeyboardInterrupt:
        return


def _show(log: SpoolLog, files: list[Path]) -> int:
    """Print what is new in `files`, and a note for each damaged line; how many messages."""
    from talk.spool_log import log_line

    records, damaged = log.read(files)
    for bad in damaged:
        warn(bad.note())
    for record in records:
        result({}, log_line(record), False)
    return len(records)


def find_record(user: str | None, typed: str) -> SpoolRecord:
    """A message in this identity's spool (inbox or any session's copy) by its id or an
    unambiguous prefix of it.

    Raises:
        UserError: `typed` is no id, or a prefix of several.
        NotFound: no message in the spool has that id.
    """
    from durable.message_ids import resolve
    from talk.spool_log import SpoolLog

    records, _ = SpoolLog().read(_log_files(spool_root(user), None)())
    by_id = {r["id"]: r for r in records}
    return by_id[resolve(typed, by_id, "received message", "`talk log` lists them")]


def _log_files(root: Path, session: str | None) -> Callable[[], list[Path]]:
    """A function listing the spool files to show now (sessions come and go while following)."""
    from durable.errors import NotFound
    from spool_writer.layout import SpoolLayout

    layout = SpoolLayout(root)
    if session is None:
        return lambda: [layout.inbox, *map(layout.session_file, sorted(layout.session_files_on_disk()))]
    spool = layout.session_file(session)
    if not spool.exists():
        raise NotFound(f"session {session!r} has no spool here; `talk session list` shows the sessions")
    return lambda: [spool]
