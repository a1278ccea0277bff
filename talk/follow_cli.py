"""`talk follow`, `talk stop`, `talk status`: start, stop and inspect the follower daemon."""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from talk.options import Json, PassFile, Relay, User
from talk.output import emit_json, result

if TYPE_CHECKING:
    from follower.account import Account
    from follower.daemon.state import FollowConfig


def spawn(folder: Path, relay: str, passphrase_file: str | None) -> int:
    """Start the daemon in its own session and wait until it holds the liveness lock."""
    from durable import daemon
    from follower.daemon.state import LOG_FILE, running_pid

    env = dict(os.environ)
    path = passphrase_file or os.environ.get("TALK_PASSPHRASE_FILE")
    if path:
        env["TALK_PASSPHRASE_FILE"] = os.path.abspath(path)
    argv = [sys.executable, "-m", "follower", "--folder", str(folder), "--relay", relay]
    return daemon.spawn(argv, lambda pid: running_pid(folder) == pid, "follower", folder / LOG_FILE, env)


def follow(
    peer: Annotated[list[str] | None, typer.Option(
        "--peer", metavar="NAME",
        help="Follow this contact (repeatable); without it, every contact, later ones too.",
    )] = None,
    interval: Annotated[float, typer.Option(
        metavar="SECONDS", help="Seconds between safety-net polls.")] = 30.0,
    foreground: Annotated[bool, typer.Option(help="Run in this terminal instead of detaching.")] = False,
    push: Annotated[bool, typer.Option(help="Use the relay's push stream (else poll only).")] = True,
    user: User = None, relay: Relay = None, passphrase_file: PassFile = None, as_json: Json = False,
) -> None:
    """Start the follower daemon: it takes the peers' mail as it lands and spools it."""
    from durable.errors import UserError
    from talk.context import open_account

    if interval <= 0:
        raise UserError("--interval must be more than 0 seconds")
    account = open_account(user, relay, passphrase_file)
    names = [account.contacts.get(p).name for p in peer or []]
    pid, config, human, started = start_following(account, names, interval, push, passphrase_file, foreground)
    _report(pid, config, human, as_json, started)


def start_following(
    account: Account, names: list[str], interval: float, push: bool, passphrase_file: str | None,
    foreground: bool = False,
) -> tuple[int, FollowConfig, str, bool]:
    """Follow `names` (none: every contact) with the running follower, else start one (detached;
    `foreground` runs it here and exits with its status); its pid, config, the line that says so,
    and whether it started now.

    Raises:
        UserError: the keys are protected and no passphrase file is given, or the passphrase is wrong.
    """
    from durable.errors import UserError
    from follower.daemon.state import FollowConfig, following, running_pid

    has_file = bool(passphrase_file or os.environ.get("TALK_PASSPHRASE_FILE"))
    if account.record.protected and not has_file:
        raise UserError("the follower runs on its own and cannot ask for the passphrase; give "
                        "--passphrase-file PATH (or TALK_PASSPHRASE_FILE)")
    account.identity()  # a wrong passphrase fails here, in the terminal, not in the daemon's log
    pid = running_pid(account.folder)
    config = FollowConfig.load(account.folder) if pid else FollowConfig()
    every = config.every or not names
    added = [] if every else [n for n in names if n not in config.peers]
    changed = bool(added) or every != config.every
    config = FollowConfig(peers=[] if every else [*config.peers, *added], interval=interval, push=push,
                          every=every)
    config.save(account.folder)
    what = following(config.peers, config.every)
    if pid:
        if changed:
            os.kill(pid, signal.SIGUSR1)
        verb = "now following" if changed else "already following"
        return pid, config, f"follower already running (pid {pid}); {verb} {what}", False
    if foreground:
        from follower.__main__ import run

        raise typer.Exit(run(account.folder, account.relay, foreground=True))
    pid = spawn(account.folder, account.relay, passphrase_file)
    return pid, config, f"following {what} (pid {pid})", True


def _report(pid: int, config: FollowConfig, human: str, as_json: bool, started: bool) -> None:
    result({"pid": pid, "peers": config.peers, "every": config.every, "started": started}, human, as_json)


def stop(
    peer: Annotated[
        list[str] | None, typer.Option("--peer", metavar="NAME", help="Stop following only this contact.")
    ] = None,
    user: User = None, as_json: Json = False,
) -> None:
    """Stop the follower (or stop following some peers)."""
    from durable import daemon
    from follower.daemon.state import FollowConfig, following, running_pid
    from talk.context import open_account

    folder = open_account(user, None, None).folder
    pid = running_pid(folder)
    if not pid:
        result({"stopped": False, "running": False}, "no follower is running", as_json)
        return
    config = FollowConfig.load(folder)
    if peer:
        from durable.errors import UserError

        if config.every:
            raise UserError("the follower follows every contact; to follow only some, stop it "
                            "(talk stop) and start it again with talk follow --peer NAME")
        unknown = [p for p in peer if p not in config.peers]
        if unknown:
            now = following(config.peers, False)
            raise UserError(f"not following {', '.join(unknown)} (following {now}); nothing changed")
        config.peers = [p for p in config.peers if p not in peer]
        config.save(folder)
        if config.peers:
            os.kill(pid, signal.SIGUSR1)
            result({"stopped": False, "running": True, "peers": config.peers},
                   f"still following {', '.join(config.peers)} (pid {pid})", as_json)
            return
    daemon.stop([pid], lambda: bool(running_pid(folder)), f"follower (pid {pid})")
    result({"stopped": True, "running": False, "pid": pid}, f"stopped the follower (pid {pid})", as_json)


def unlock(user: User = None, passphrase_file: PassFile = None, as_json: Json = False) -> None:
    """Hand the running follower the key your passphrase opens, so that later commands skip the
    passphrase (and its ~80 ms key derivation) until `talk lock` or the follower stops.

    While unlocked, any program running as you can use these keys without the passphrase, as
    with ssh-agent. The key stays in the follower's memory only, never on disk.
    """
    from durable.errors import UserError
    from follower.daemon.keyagent import ask
    from follower.daemon.liveness import running_pid
    from keys.encoding import b64e
    from keys.keystore import unlocking_key
    from talk.context import identity_record, unlocking_passphrase

    record = identity_record(user)
    if not record.protected:
        raise UserError(f"identity {record.name!r} has no passphrase: there is nothing to unlock")
    pid = running_pid(record.folder)
    if not pid:
        raise UserError(f"no follower is running for {record.name}: start it with `talk follow`, "
                        "then `talk unlock` hands it the key")
    key = unlocking_key(record, unlocking_passphrase(record, passphrase_file))
    reply = ask(record.folder, {"op": "unlock", "key": b64e(key)})
    if not reply or "error" in reply:
        why = reply["error"] if reply else "it did not answer on its key socket"
        raise UserError(f"the follower (pid {pid}) did not take the key: {why}; restart it with "
                        "`talk stop` and `talk follow`")
    result({"unlocked": True, "pid": pid},
           f"unlocked: the follower (pid {pid}) holds {record.name}'s key until `talk lock` or it stops",
           as_json)


def lock(user: User = None, as_json: Json = False) -> None:
    """Make the follower forget the key `talk unlock` gave it: commands ask for the passphrase again."""
    from follower.daemon.keyagent import ask
    from talk.context import identity_record

    record = identity_record(user)
    reply = ask(record.folder, {"op": "lock"})
    was = bool(reply and reply.get("was"))
    human = ("locked: the follower forgot the key" if was else
             "nothing was unlocked" + ("" if reply else " (no follower answered)"))
    result({"locked": True, "was_unlocked": was}, human, as_json)


def status(
    message: Annotated[str | None, typer.Argument(
        metavar="ID", help="A sent message's id, or a prefix of it: show how far it got.")] = None,
    user: User = None, as_json: Json = False,
) -> None:
    """Show the follower, the registered sessions and where mail waits; or one sent message."""
    from talk.context import open_account

    folder = open_account(user, None, None).folder
    if message is not None:
        from talk.conversation_cli import message_status

        message_status(folder, message, as_json)
        return
    report = gather_status(folder)
    if as_json:
        emit_json(report)
        return
    result(report, render_status(report), False)


def gather_status(folder: Path) -> dict[str, Any]:
    from alarms.registry import hosts
    from follower.daemon.state import FollowStatus, running_pid
    from follower.files.parked import Parked
    from follower.receive.quarantine import Quarantine
    from spool_writer.layout import count_lines
    from spool_writer.sessions import list_sessions

    pid = running_pid(folder)
    st = FollowStatus.load(folder)
    follower: dict[str, Any] = {"running": bool(pid), "pid": pid if pid else None}
    if st is not None:
        follower.update(
            peers=st.peers, every=st.every, since=st.since, relay=st.relay, last_contact=st.last_contact,
            last_error=st.last_error, last_error_at=st.last_error_at,
            push=st.push if pid else "off", delivered=st.delivered, refused=st.refused,
            republished_at=st.republished_at,
        )
    spool = folder / "spool"
    found = list_sessions(spool)
    by_name = {host.NAME: host for host in hosts()}
    # what brings mail into each kind of session (a Claude Code session's depends on its plugin)
    wakes = {name: by_name[name].wakes(folder) for name in {str(x.host) for x in found} if name in by_name}
    sessions = [
        {"sid": x.sid, "host": str(x.host), "pid": x.pid, "alive": x.alive, "spool": str(x.spool),
         "unread": x.unread, "door": wakes.get(str(x.host), "none")}
        for x in found
    ]
    daemon_doors = dict(filter(None, (host.door_status(folder) for host in by_name.values())))
    return {"follower": follower, "sessions": sessions, "inbox": str(spool / "inbox.ndjson"),
            "inbox_waiting": count_lines(spool / "inbox.ndjson"), **daemon_doors,
            "waiting_hosts": waiting_hosts(folder, sessions),
            "missing": missing_rows(folder),
            "quarantined": len(Quarantine(folder).lost()), "forward_secrecy": secrecy_rows(folder),
            "loop_guard": guard_report(folder), "uploads": upload_rows(folder),
            "downloading": sum(m.announces_files for m in Parked(folder).waiting())}


def upload_rows(folder: Path) -> list[dict[str, Any]]:
    """The file transfers whose message is not sent yet, and how far each upload got."""
    from follower.send.transfer import TransferBook

    return [t.summary() for t in TransferBook(folder).pending()]


def waiting_hosts(folder: Path, sessions: list[dict[str, Any]]) -> list[dict[str, str]]:
    """The hosts talk is wired into that have no live session: when a new one can take mail."""
    from alarms.registry import hosts

    live = {x["host"] for x in sessions if x["alive"]}
    rows = []
    for host in hosts():
        if host.NAME in live:
            continue
        wiring = host.wiring(folder)
        if wiring.talk_written:
            rows.append({"host": host.NAME, "title": host.TITLE, "wiring": str(wiring.state),
                         "reach": host.REACH})
    return rows


def guard_report(folder: Path) -> dict[str, Any]:
    """The loop guard's cap and, per group it counts, each member's agent messages in a row and
    whether it holds that member (`follower.groups.loop_guard`)."""
    from follower.groups.loop_guard import LoopGuard, status_rows
    from keys import keystore
    from keys.contacts import ContactBook
    from keys.groups.book import GroupBook

    guard = LoopGuard(folder)
    names = {gid: g.name for gid, g in GroupBook(folder).all().items()}
    me = keystore.load(folder)
    who = {**{c.fingerprint: c.name for c in ContactBook(folder).all()}, me.fingerprint: me.name}
    return {"cap": guard.cap(), "groups": status_rows(guard.states(), names, who, me.fingerprint)}


def secrecy_rows(folder: Path) -> list[dict[str, Any]]:
    """Per contact with an Olm session: forward secrecy is on, and what broke the session and
    whether it began again. The same fields on both sides: `peer_lost` counts the times the
    contact said it lost our session (we are its sender), `unopened` the contact's messages we
    could not open for want of one (we are its receiver); times are seconds since the epoch."""
    from keys.contacts import ContactBook
    from keys.ratchet.sessions import session_history

    book = ContactBook(folder)
    rows = []
    for fp, history in session_history(folder).items():
        contact = book.by_fingerprint(fp)
        rows.append({"name": contact.name if contact else fp, "fingerprint": fp,
                     "forward_secrecy": history.sessions > 0,
                     "peer_lost": history.lost, "peer_lost_at": history.lost_at or None,
                     "unopened": history.unopened, "unopened_at": history.unopened_at or None,
                     "reestablished_at": history.reestablished_at})
    return rows


def render_secrecy(row: dict[str, Any]) -> str:
    """One line per contact, whichever side of a loss this identity was on."""
    name = row["name"]
    broken = []
    if row["peer_lost"]:
        broken.append(f"{name} lost our session {row['peer_lost']} time(s), last {_ago(row['peer_lost_at'])}")
    if row["unopened"]:
        count = row["unopened"]
        broken.append(f"could not open {count} message{'s' if count != 1 else ''} from {name} for want of "
                      f"a session, last {_ago(row['unopened_at'])}")
    if not broken:
        return f"forward secrecy with {name}: on"
    if row["reestablished_at"] is None:
        after = f"not re-established yet ({name}'s next message, or ours, starts a new one)"
    else:
        after = f"session re-established {_ago(row['reestablished_at'])}"
    return f"forward secrecy with {name}: on; {'; '.join(broken)}; {after}"


def missing_rows(folder: Path) -> list[dict[str, Any]]:
    """Per contact, how many of its numbered messages never arrived (a relay dropped them)."""
    from follower.receive.channeldb import missing_mail
    from keys.contacts import ContactBook

    book = ContactBook(folder)
    rows = []
    for fp, count in sorted(missing_mail(folder, time.time()).items()):
        contact = book.by_fingerprint(fp)
        rows.append({"from": fp, "name": contact.name if contact else fp, "count": count})
    return rows


def render_missing(row: dict[str, Any]) -> str:
    count = row["count"]
    return (f"{count} message{'s' if count != 1 else ''} from {row['name']} missing: numbered by "
            f"{row['name']} but never delivered (ask them to send again)")


def _ago(ts: float | None) -> str:
    if ts is None:
        return "never"
    return f"{max(0.0, time.time() - ts):.0f} s ago"


def render_status(report: dict[str, Any]) -> str:
    from follower.daemon.state import following
    from follower.groups.loop_guard import render_row

    f = report["follower"]
    if f["running"]:
        lines = [f"follower: running (pid {f['pid']}), following "
                 f"{following(f.get('peers', []), bool(f.get('every')))}",
                 f"  relay {f.get('relay')}, push {f.get('push')}, "
                 f"last contact {_ago(f.get('last_contact'))}",
                 f"  delivered {f.get('delivered', 0)}, refused {f.get('refused', 0)}"]
    else:
        lines = ["follower: not running (start it with `talk follow --peer NAME`)"]
    if f.get("last_error"):
        lines.append(f"  last error ({_ago(f.get('last_error_at'))}): {f['last_error']}")
    if f.get("republished_at"):
        lines.append(f"  keys published again {_ago(f['republished_at'])}: the relay had lost them "
                     "(its store may have restarted empty); nothing to do")
    from alarms.registry import hosts

    for x in report["sessions"]:
        state = "live" if x["alive"] else "ended"
        lines.append(f"session {x['sid']} ({x['host']}, pid {x['pid']}, {state}): "
                     f"{x['unread']} waiting in {x['spool']}\n  door: {x['door']}")
    if not report["sessions"]:
        lines.append("no sessions registered")
    for row in report.get("waiting_hosts", []):
        lines.append(f"{row['title']}: {row['wiring']}, no live session; a new one takes mail {row['reach']}")
    for host in hosts():
        lines += host.render_status(report)  # a daemon door's state, from its own key of the report
    lines += [render_missing(row) for row in report["missing"]]
    lines += [render_secrecy(row) for row in report.get("forward_secrecy", [])]
    guard = report.get("loop_guard", {"cap": None, "groups": []})
    lines += [render_row(row, guard["cap"]) for row in guard["groups"]]
    from follower.send.transfer import progress_line

    lines += [progress_line(row) for row in report.get("uploads", [])]
    lines.append(f"fallback inbox: {report['inbox_waiting']} waiting in {report['inbox']}")
    if report.get("downloading"):
        lines.append(f"downloading: the files of {report['downloading']} message(s); each is handed on "
                     "once its files are in")
    if report.get("quarantined"):
        lines.append(f"quarantined: {report['quarantined']} refused message(s) that never came again; "
                     "`talk quarantine` lists them")
    return "\n".join(lines)


def quarantine(user: User = None, as_json: Json = False) -> None:
    """List mail refused on arrival (malformed, tampered, unknown sender): kept, never shown; a
    message that came again later and was taken is marked recovered."""
    from follower.receive.quarantine import Quarantine, arrived_ids, settled
    from talk.context import open_account

    folder = open_account(user, None, None).folder
    entries = settled(Quarantine(folder).entries(), arrived_ids(folder))
    if as_json:
        for entry in entries:
            emit_json({k: v for k, v in entry.items() if k != "blob"})
        return
    if not entries:
        result({}, "nothing quarantined", False)
        return
    for e in entries:
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(float(e.get("at", 0))))
        who = f" from {e['from']}" if e.get("from") else ""
        later = " (recovered: it came again and was taken)" if e["recovered"] else ""
        result({}, f"{when}{who}: {e.get('reason', '?')}{later}", False)
