"""`talk alarm opencode` and `talk alarm stop opencode`: start and stop the opencode alarm daemon.

Wiring only: the daemon is `alarms.opencode`. One alarm per opencode session; asking again for
a session (or, without --session, for a server URL) that already has a live alarm reports it.
`opencode_wiring` is the alarm's line in `talk doctor`.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from talk.help_format import TalkTyper
from talk.options import Json, User
from talk.output import result
from talk.wiring import State, Wiring

alarm_app = TalkTyper(
    help="Alarms: wake an agent session when mail arrives (opencode: a daemon posting to its server).",
    no_args_is_help=True,
)
stop_app = TalkTyper(help="Stop an alarm daemon.", no_args_is_help=True)
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


def _live_alarm(folder: Path, url: str, sid: str | None) -> dict[str, Any] | None:
    """The running alarm serving `sid` (or, with no sid, the server `url`), if any."""
    from alarms.opencode_status import alarm_status

    for row in alarm_status(folder):
        if row["running"] and (row["session"] == sid if sid else row["url"] == url.rstrip("/")):
            return row
    return None


def spawn(folder: Path, url: str, sid: str, pid: int | None) -> int:
    """Start the daemon in its own session and wait until it holds the liveness lock."""
    from alarms.opencode_status import AlarmFiles, running_pid
    from durable import daemon

    argv = [sys.executable, "-m", "alarms.opencode", "--folder", str(folder), "--url", url, "--session", sid]
    if pid is not None:
        argv += ["--pid", str(pid)]
    return daemon.spawn(argv, lambda child: running_pid(folder, sid) == child, "opencode alarm",
                        AlarmFiles(folder, sid).log)


def _new_session(url: str) -> str:
    from alarms.opencode_api import OpencodeClient, OpencodeError
    from durable.errors import UserError

    try:
        return OpencodeClient(url).create_session()
    except (OpencodeError, ValueError) as exc:
        raise UserError(f"cannot create an opencode session at {url} ({exc}); start `opencode serve` "
                        "there, or pass --session ID of an existing session") from exc


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
    from alarms.opencode_api import split_url
    from durable.errors import UserError
    from spool_writer.layout import check_sid

    try:
        split_url(url)
    except ValueError as exc:
        raise UserError(str(exc)) from exc
    url = url.rstrip("/")
    folder = _folder(user)
    live = _live_alarm(folder, url, check_sid(session) if session else None)
    if live is not None:
        _report(live["pid"], live["session"], url, False,
                f"opencode alarm already running for session {live['session']} (pid {live['pid']})", as_json)
        return
    sid = session or _new_session(url)
    if foreground:
        from alarms.opencode import run

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
    from alarms.qwen import ensure, installed_home, require_installed
    from alarms.qwen_registry import qwen_home as default_home

    folder = _folder(user)
    require_installed(folder)  # refuse early, with the fix
    home = qwen_home or installed_home(folder) or default_home()
    pid = ensure(folder, home.expanduser().resolve())
    result({"pid": pid}, f"Qwen door running (pid {pid})", as_json)


@stop_app.command("qwen")
def stop_qwen(user: User = None, as_json: Json = False) -> None:
    """Stop the Qwen Code door (mail stays in its outbox and the spool)."""
    from alarms.qwen_status import running_pid
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
    from alarms.opencode_status import alarm_status, running_pid
    from durable import daemon

    folder = _folder(user)
    rows = [r for r in alarm_status(folder) if r["running"] and (session is None or r["session"] == session)]
    if not rows:
        result({"stopped": []}, "no opencode alarm is running", as_json)
        return
    daemon.stop([r["pid"] for r in rows], lambda: any(running_pid(folder, r["session"]) for r in rows),
                "opencode alarm")
    stopped = [{"session": r["session"], "pid": r["pid"]} for r in rows]
    result({"stopped": stopped},
           "\n".join(f"stopped the opencode alarm of session {r['session']} (pid {r['pid']})" for r in rows),
           as_json)


def opencode_wiring(folder: Path) -> Wiring:
    """The opencode alarms of an identity, for `talk doctor`: one stopped while mail waits for its
    session is a problem, and so is one running that cannot deliver (opencode down, refusing, or
    not the user's own); one stopped with nothing waiting is a session that ended."""
    from alarms.opencode_status import State as AlarmState
    from alarms.opencode_status import alarm_status

    rows = alarm_status(folder)
    if not rows:
        return Wiring("opencode", State.ABSENT, "no alarm started (talk alarm opencode --url URL starts one)")
    stuck = [r for r in rows if not r["running"] and (r["outbox"] or r["waiting"] > 0)]
    if stuck:
        r = stuck[0]
        return Wiring("opencode", State.INCOMPLETE,
                      f"the alarm for session {r['session']} is not running and mail waits for it",
                      f"talk alarm opencode --url {r['url']} --session {r['session']}")
    waiting = [r for r in rows if r["running"] and r["state"] == AlarmState.WAITING and r["last_error"]]
    if waiting:
        r = waiting[0]
        return Wiring("opencode", State.INCOMPLETE,
                      f"the alarm for session {r['session']} cannot deliver: {r['last_error']}",
                      "talk status")
    running = sum(1 for r in rows if r["running"])
    return Wiring("opencode", State.WIRED, f"{running} alarm(s) running, {len(rows) - running} stopped")
