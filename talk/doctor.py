"""`talk doctor`: is everything wired? One line per check, ok, warn or fail, and for each
problem the one command that fixes it.

The checks only read: the identity and its relay (reachable, its clock, our published keys),
the follower and its push stream, the registered sessions, the spool's size and the free disk,
and talk's wiring in each agent host of `alarms.registry`, as each host judges it (`wiring`),
which hosts installed here talk is not wired into at all (`talk setup` wires them),
and whether another user could write into what those installs wrote (`alarms.host_files`): only
`--fix` changes anything, taking others' write permission from such files and folders.
Exit status 0 when nothing failed, 1 otherwise; `--json` gives the same as a list. Every line
goes through `durable.printable`: a detail may quote a relay's answer.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated, Any, NamedTuple

import typer

from talk.options import Json, Relay, User
from talk.output import emit_json, say

SKEW_WARN_S = 60.0  # owner signatures carry a time the relay checks; a clock this far off trips them
SPOOL_WARN_BYTES = 200 * 2**20
DISK_FAIL_BYTES = 100 * 2**20


class Check(NamedTuple):
    name: str
    status: str  # ok | warn | fail
    detail: str
    fix: str = ""

    def line(self) -> str:
        fix = f"\n      fix: {self.fix}" if self.fix else ""
        return f"{self.status:4}  {self.name}: {self.detail}{fix}"


def skew_of(date_header: str | None, now: float) -> float | None:
    """How far the relay's clock (its Date header) is from ours, in seconds; None if unknown."""
    import email.utils

    if not date_header:
        return None
    try:
        return email.utils.parsedate_to_datetime(date_header).timestamp() - now
    except (TypeError, ValueError):
        return None


def relay_checks(relay: str) -> list[Check]:
    import urllib.request

    sent = time.time()
    try:
        with urllib.request.urlopen(f"{relay.rstrip('/')}/healthz", timeout=10) as answer:
            date = answer.headers.get("date")
    except OSError as exc:
        return [Check("relay", "fail", f"{relay} did not answer ({exc})",
                      "start it (talk relay), or point at the right one: --relay URL or TALK_RELAY")]
    checks = [Check("relay", "ok", f"{relay} answers")]
    skew = skew_of(date, (sent + time.time()) / 2)
    if skew is not None and abs(skew) > SKEW_WARN_S:
        checks.append(Check("clock", "warn", f"this machine's clock is {skew:+.0f} s from the relay's",
                            "set the clock right (timedatectl set-ntp true)"))
    elif skew is not None:
        checks.append(Check("clock", "ok", f"within {abs(skew):.0f} s of the relay's"))
    return checks


def keys_check(account: Any) -> Check:
    from durable.errors import TalkError

    try:
        published = account.client.bundle(account.record.fingerprint)
    except TalkError as exc:
        return Check("keys", "fail", f"the relay has no keys for this identity ({exc})", "talk publish")
    if published.fingerprint != account.record.fingerprint:
        return Check("keys", "fail", "the relay holds other keys under this fingerprint", "talk publish")
    return Check("keys", "ok", "published on the relay")


def follower_checks(folder: Path) -> list[Check]:
    from follower.daemon.state import FollowStatus, following, running_pid

    pid = running_pid(folder)
    if not pid:
        return [Check("follower", "warn", "not running: mail waits on the relay until a receive",
                      "talk follow")]
    status = FollowStatus.load(folder)
    what = following(status.peers, status.every) if status else "?"
    checks = [Check("follower", "ok", f"running (pid {pid}), following {what}")]
    if status is not None and status.push != "connected":
        checks.append(Check("push", "warn", f"push stream {status.push}: mail comes at each poll instead",
                            "check the relay passes WebSocket upgrades; talk status shows the last error"))
    elif status is not None:
        checks.append(Check("push", "ok", "connected"))
    if status is not None and status.last_error:
        checks.append(Check("follower error", "warn", status.last_error, "talk status"))
    return checks


def spool_checks(folder: Path) -> list[Check]:
    import shutil

    from spool_writer.sessions import list_sessions

    root = folder / "spool"
    sessions = list_sessions(root)
    live = [s for s in sessions if s.alive]
    ended = len(sessions) - len(live)
    checks = [Check("sessions", "ok" if not ended else "warn",
                    f"{len(live)} live" + (f", {ended} ended still registered" if ended else ""),
                    "talk gc" if ended else "")]
    size = sum(p.stat().st_size for p in root.rglob("*") if p.is_file()) if root.is_dir() else 0
    checks.append(Check("spool", "ok" if size < SPOOL_WARN_BYTES else "warn", f"{size / 2**20:.1f} MiB",
                        "" if size < SPOOL_WARN_BYTES else "talk gc"))
    free = shutil.disk_usage(folder).free
    checks.append(Check("disk", "ok" if free >= DISK_FAIL_BYTES else "fail",
                        f"{free / 2**30:.1f} GiB free where TALK_HOME is",
                        "" if free >= DISK_FAIL_BYTES else "free some space: the spool cannot take mail"))
    return checks


def host_checks(folder: Path | None, fix: bool = False) -> list[Check]:
    """One line per agent host in `alarms.registry`; a daemon door judges from the identity's folder."""
    from alarms.registry import hosts

    wirings = [host.wiring(folder) for host in hosts()]
    checks = [Check(w.host, w.status, w.detail, w.fix) for w in wirings]
    return [*checks, setup_check(folder), *files_checks(fix)]


def setup_check(folder: Path | None) -> Check:
    """One line naming the hosts installed here (program on PATH, or their folder) that talk is not
    wired into, though `talk setup` would wire them."""
    from talk.setup_cli import survey
    from talk.setup_report import needs_setup

    left = needs_setup(survey(folder))
    if not left:
        return Check("setup", "ok", "talk is wired into every agent host installed here")
    titles = ", ".join(h.title for h in left)
    return Check("setup", "warn", f"installed here but talk is not wired in: {titles}", "talk setup")


def files_checks(fix: bool) -> list[Check]:
    """A line per host where another user could write into what `talk install` wrote (and so add
    code the host runs as this user); with `fix`, those write permissions are taken away."""
    from alarms.host_files import loose, tighten
    from alarms.registry import hosts

    checks = []
    for host in hosts():
        found = loose(host.paths())
        fixed = tighten(found) if fix else []
        if fixed:
            checks.append(Check(f"{host.NAME} files", "ok",
                                f"others can no longer write to {', '.join(map(str, fixed))}"))
        left = loose(found) if fix else found
        if left:
            how = "ask its owner to close it, or move it aside" if fix else "talk doctor --fix"
            checks.append(Check(f"{host.NAME} files", "fail", f"other users can write to "
                                f"{', '.join(map(str, left))}, and so add code {host.NAME} runs as you", how))
    return checks or [Check("host files", "ok", "what talk installed in agent hosts only you can write to")]


def run_checks(user: str | None, relay: str | None, fix: bool = False) -> list[Check]:
    from durable.errors import TalkError
    from talk.context import open_account

    try:
        account = open_account(user, relay, None)
    except TalkError as exc:
        return [Check("identity", "fail", exc.message, "talk init NAME (talk whoami lists them)"),
                *host_checks(None, fix)]
    checks = [Check("identity", "ok", f"{account.record.name} ({account.record.fingerprint})")]
    checks += relay_checks(account.relay)
    if checks[-1].status != "fail" or checks[-1].name != "relay":
        checks.append(keys_check(account))
    folder = account.folder
    return checks + follower_checks(folder) + spool_checks(folder) + host_checks(folder, fix)


def doctor(
    user: User = None, relay: Relay = None, as_json: Json = False,
    quiet: Annotated[bool, typer.Option("--problems", help="Show only what is not ok.")] = False,
    fix: Annotated[bool, typer.Option(
        "--fix", help="Take other users' write permission from the files and folders talk installed "
        "into agent hosts (the only change doctor makes).")] = False,
) -> None:
    """Check that everything is wired: identity, relay, clock, keys, follower, push, sessions, spool, disk,
    talk in each agent host, and that no other user can write to what talk installed there."""
    checks = run_checks(user, relay, fix)
    shown = [c for c in checks if not quiet or c.status != "ok"]
    if as_json:
        emit_json([c._asdict() for c in shown])
    else:
        say("\n".join(c.line() for c in shown) or "all ok")
    if any(c.status == "fail" for c in checks):
        raise typer.Exit(1)
