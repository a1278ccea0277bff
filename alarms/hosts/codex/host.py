"""Which process a Codex session lives with: the program the user runs, never a helper that outlives it.

A talk session is live while its host process runs (`spool_writer.process`: pid and start
time), and new mail goes to live sessions only. A Codex hook runs as a child of whatever runs
the thread. For `codex exec`, or a TUI that keeps its app-server in-process, that is the host.
Since 0.171 a TUI starts a shared app-server daemon by default (`codex app-server --listen
unix:// --managed-daemon`) that runs the threads, and the hooks, of every TUI using the same
CODEX_HOME. The daemon outlives `/quit` by minutes, and even runs a turn queued for a thread
whose TUI has gone: a session registered with its pid stays "live" and swallows mail nobody
reads.

So when the nearest codex ancestor is such a daemon, the host is the TUI that shows the
thread: a `codex` process of this user with the same CODEX_HOME that is not a helper
subcommand, chosen by `choose_tui`:

1. one whose command line names the thread (`codex resume ID`);
2. else, preferring those whose working folder is the thread's, the one started last before
   the thread was created. A thread id is a UUIDv7, whose first 48 bits are its creation time
   in ms, and a TUI opens its first thread right after it starts.

None found means no TUI shows the thread (its TUI quit while the daemon runs a queued turn, or
the client is not a TUI): the hook registers nothing and hands nothing over, and the mail
waits in the inbox for a session whose host can be seen. Known limit: of two TUIs in one
folder, if the later-started one has not opened the thread but the earlier one opened it with
/new after the later one started, the thread is taken for the later one's, and the session
lives as long as that TUI does.

Linux only (/proc). `choose_tui` and `is_tui` are pure; `find_host` reads /proc.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

PROC = Path("/proc")
NAME = "codex"
# Subcommands that never show a thread to a user: a process running one is not a TUI.
HELPERS = frozenset({"app-server", "exec", "e", "queue", "mcp", "mcp-server", "exec-server", "login",
                     "logout", "plugin", "remote-control", "completion", "update", "doctor", "sandbox",
                     "debug", "apply", "a", "archive", "delete", "unarchive", "migrate-rollouts",
                     "migrate-nfs-db", "cloud", "features", "review", "help"})
DAEMON_FLAGS = ("--listen", "--managed-daemon")
START_SLACK_S = 2.0  # clock granularity between a process's start time and a thread id's


@dataclass(frozen=True)
class CodexProcess:
    pid: int
    argv: tuple[str, ...]
    started: float  # wall clock, seconds
    cwd: str | None
    codex_home: str | None


def is_daemon(argv: tuple[str, ...]) -> bool:
    """An app-server that serves other processes' threads (and outlives them), not one a client
    started on its own stdio and that ends with it."""
    return "app-server" in argv[1:] and any(flag in argv for flag in DAEMON_FLAGS)


def is_tui(argv: tuple[str, ...]) -> bool:
    """A `codex` command line that opens the interactive UI: no helper subcommand in it."""
    return bool(argv) and os.path.basename(argv[0]) == NAME and not any(a in HELPERS for a in argv[1:])


def thread_created(thread_id: str) -> float | None:
    """When a UUIDv7 thread id was made (epoch seconds), or None if it is not one."""
    digits = thread_id.replace("-", "")
    if len(digits) != 32 or digits[12] != "7":
        return None
    try:
        return int(digits[:12], 16) / 1000.0
    except ValueError:
        return None


def choose_tui(procs: list[CodexProcess], thread_id: str, cwd: str | None, codex_home: str) -> int | None:
    """The pid of the TUI showing `thread_id` among `procs`, or None (see the module docstring)."""
    tuis = [p for p in procs if is_tui(p.argv) and p.codex_home == codex_home]
    named = [p for p in tuis if thread_id in p.argv]
    if named:
        return max(named, key=lambda p: p.started).pid
    created = thread_created(thread_id)
    if created is None:
        return None
    before = [p for p in tuis if p.started <= created + START_SLACK_S]
    here = [p for p in before if cwd is not None and p.cwd == cwd]
    pool = here or before
    return max(pool, key=lambda p: p.started).pid if pool else None


# --- /proc ------------------------------------------------------------------------------------


def home_of(environ: dict[str, str]) -> str | None:
    """The CODEX_HOME a process with this environment uses (resolved), or None if unknown."""
    home = environ.get("CODEX_HOME")
    if not home and environ.get("HOME"):
        home = os.path.join(environ["HOME"], ".codex")
    return os.path.realpath(home) if home else None


def _argv(pid: int) -> tuple[str, ...]:
    raw = (PROC / str(pid) / "cmdline").read_bytes()
    return tuple(a.decode(errors="replace") for a in raw.split(b"\0") if a)


def _environ(pid: int) -> dict[str, str]:
    env: dict[str, str] = {}
    for item in (PROC / str(pid) / "environ").read_bytes().split(b"\0"):
        key, sep, value = item.decode(errors="replace").partition("=")
        if sep:
            env[key] = value
    return env


def _boot_time() -> float:
    for line in (PROC / "stat").read_text().splitlines():
        if line.startswith("btime "):
            return float(line.split()[1])
    raise OSError("no btime in /proc/stat")


def _comm(pid: int) -> str:
    raw = (PROC / str(pid) / "stat").read_bytes()
    return raw[raw.find(b"(") + 1:raw.rfind(b")")].decode(errors="replace")


def codex_processes() -> list[CodexProcess]:
    """Every running `codex` program of this user whose details can be read."""
    from spool_writer.process import start_time

    boot, ticks = _boot_time(), os.sysconf("SC_CLK_TCK")
    found = []
    for entry in os.listdir(PROC):
        if not entry.isdigit():
            continue
        pid = int(entry)
        try:
            if _comm(pid) != NAME:
                continue
            start = start_time(pid)
            if start is None:
                continue
            try:
                cwd: str | None = os.readlink(PROC / entry / "cwd")
            except OSError:
                cwd = None
            found.append(CodexProcess(pid, _argv(pid), boot + start / ticks, cwd, home_of(_environ(pid))))
        except OSError:
            continue  # gone, or another user's
    return found


def find_host(ancestor: int, thread_id: str, cwd: str | None, env: dict[str, str]) -> int | None:
    """The pid the session of `thread_id` lives with, given its hook's nearest codex ancestor."""
    try:
        argv = _argv(ancestor)
    except OSError:
        return None
    if not is_daemon(argv):
        return ancestor
    home = home_of(env)
    if home is None:
        return None
    return choose_tui(codex_processes(), thread_id, cwd, home)


def host_is_tui(pid: int) -> bool:
    try:
        return is_tui(_argv(pid))
    except OSError:
        return False
