"""`talk alarm opencode|qwen` and `talk alarm stop opencode|qwen`: start and stop daemon doors.

Options and output only: starting, finding and stopping the doors is `alarms.hosts.opencode.install`
and `alarms.hosts.qwen.daemon`'s.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from talk.help_format import TalkTyper
from talk.options import Json, User
from talk.output import result

alarm_app = TalkTyper(
    help="Daemon doors: bring mail into agent sessions as it arrives (opencode, Qwen Code).",
    no_args_is_help=True,
)
stop_app = TalkTyper(help="Stop a daemon door.", no_args_is_help=True)
alarm_app.add_typer(stop_app, name="stop")

Url = Annotated[str, typer.Option(
    "--url", metavar="URL", help="The opencode server, e.g. http://127.0.0.1:4096.")]
SessionOpt = Annotated[
    str | None, typer.Option(
        "--session", metavar="ID", help="opencode session id (default: create one titled 'talk').")
]


def _folder(user: str | None) -> Path:
    from talk.context import open_account

    return open_account(user, None, None).folder


@alarm_app.command("opencode")
def opencode(
    url: Url,
    session: SessionOpt = None,
    pid: Annotated[
        int | None, typer.Option(
            "--pid", metavar="PID", help="Pid the session lives with (default: the opencode server's).")
    ] = None,
    foreground: Annotated[bool, typer.Option(help="Run in this terminal instead of detaching.")] = False,
    user: User = None, as_json: Json = False,
) -> None:
    """Start the opencode alarm: new mail becomes a turn of an opencode session (prompt_async)."""
    from alarms.hosts.opencode.api import split_url
    from durable.errors import UserError
    from spool_writer.layout import check_sid

    try:
        split_url(url)
    except ValueError as exc:
        raise UserError(str(exc)) from exc
    url = url.rstrip("/")
    from alarms.hosts.opencode.install import live_door, new_session, spawn

    folder = _folder(user)
    live = live_door(folder, url, check_sid(session) if session else None)
    if live is not None:
        _report(live["pid"], live["session"], url, False,
                f"opencode alarm already running for session {live['session']} (pid {live['pid']})", as_json)
        return
    sid = session or new_session(url)
    if foreground:
        from alarms.hosts.opencode.daemon import run

        raise typer.Exit(run(folder, url, sid, pid, foreground=True))
    child = spawn(folder, url, sid, pid)
    _report(child, sid, url, True, f"opencode alarm for session {sid} at {url} (pid {child})", as_json)


def _report(pid: int, sid: str, url: str, started: bool, human: str, as_json: bool) -> None:
    result({"pid": pid, "session": sid, "url": url, "started": started}, human, as_json)


@alarm_app.command("qwen")
def qwen(
    qwen_home: Annotated[
        Path | None,
        typer.Option("--qwen-home", help="Qwen Code's home (default: the one `talk install qwen` used)."),
    ] = None,
    user: User = None, as_json: Json = False,
) -> None:
    """Start the Qwen Code door now (its SessionStart hook, from `talk install qwen`, also does)."""
    from alarms.hosts.qwen.daemon import ensure, installed_home, require_installed
    from alarms.hosts.qwen.registry import qwen_home as default_home

    folder = _folder(user)
    require_installed(folder)  # refuse early, with the fix
    home = qwen_home or installed_home(folder) or default_home()
    pid = ensure(folder, home.expanduser().resolve())
    result({"pid": pid}, f"Qwen door running (pid {pid})", as_json)


@stop_app.command("qwen")
def stop_qwen(user: User = None, as_json: Json = False) -> None:
    """Stop the Qwen Code door (mail stays in its outbox and the spool)."""
    from alarms.hosts.qwen.status import running_pid
    from durable import daemon

    folder = _folder(user)
    pid = running_pid(folder)
    if pid is None or pid <= 0:
        result({"stopped": None}, "no Qwen door is running", as_json)
        return
    daemon.stop([pid], lambda: running_pid(folder) is not None, "Qwen door")
    result({"stopped": pid}, f"stopped the Qwen door (pid {pid})", as_json)


@stop_app.command("opencode")
def stop_opencode(session: SessionOpt = None, user: User = None, as_json: Json = False) -> None:
    """Stop the opencode alarm of one session (default: every opencode alarm of this identity)."""
    from alarms.hosts.opencode.install import stop_doors

    stopped = stop_doors(_folder(user), session)
    if not stopped:
        result({"stopped": []}, "no opencode alarm is running", as_json)
        return
    rows = stopped
    result({"stopped": stopped},
           "\n".join(f"stopped the opencode alarm of session {r['session']} (pid {r['pid']})" for r in rows),
           as_json)
