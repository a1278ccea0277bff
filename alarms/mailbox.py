"""What every door needs: find the identity, register its session, take its new mail.

Standard library plus `spool_writer` only, so a hook that finds nothing costs a process start
and a few file reads.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from durable.home import identity_names, talk_home

if TYPE_CHECKING:  # the Codex hook's no-mail path imports this module: nothing it does not use
    from spool_writer.record import SpoolRecord

__all__ = ["SessionMail", "find_host_pid"]


class NoIdentity(Exception):
    """TALK_HOME holds no identity this door can use (or several, and TALK_USER is unset)."""


def identity_folder(env: dict[str, str] | None = None) -> Path:
    """TALK_HOME/TALK_USER, or the only identity in TALK_HOME (default ~/.talk)."""
    env = dict(os.environ) if env is None else env
    home = talk_home(env)
    names, user = identity_names(home), env.get("TALK_USER")
    if user:
        if user not in names:
            raise NoIdentity(f"no identity {user!r} in {home}")
        return Path(home, user)
    if len(names) != 1:
        raise NoIdentity(f"{len(names)} identities in {home}; set TALK_USER")
    return Path(home, names[0])


class SessionMail:
    """One agent session's share of the spool: its registration and its cursor."""

    def __init__(self, folder: Path, sid: str) -> None:
        from spool_writer.layout import SpoolLayout, check_sid

        self.sid = check_sid(sid)
        self.layout = SpoolLayout(folder / "spool")

    def register(self, host: str, pid: int) -> int:
        """Register (again) for new mail; returns how many inbox lines this session took over."""
        from spool_writer.sessions import register

        return register(self.layout.root, host, self.sid, pid).took_over

    def retire(self) -> None:
        """Stop taking new mail; unread lines go back to the inbox. Nothing if not registered."""
        import contextlib

        from durable.errors import NotFound
        from spool_writer.sessions import unregister

        with contextlib.suppress(NotFound):
            unregister(self.layout.root, self.sid)

    def registered(self) -> bool:
        return self.layout.session_file(self.sid).exists()

    def take(self) -> list[SpoolRecord]:
        """New messages, each exactly once across all doors; the cursor moves before return."""
        from spool_writer.cursor import CursorReader

        spool = self.layout.session_file(self.sid)
        if not spool.exists():
            return []
        cursor = self.layout.cursor_file(self.sid)
        reader = CursorReader(spool, cursor, handed=self.layout.handed, sid=self.sid)
        return reader.take()

    def waiting(self) -> int:
        from spool_writer.cursor import CursorReader

        spool = self.layout.session_file(self.sid)
        if not spool.exists():
            return 0
        return CursorReader(spool, self.layout.cursor_file(self.sid)).count_unread()


RETRY_S = 5.0


def connect(sid: str, host: str, pid: int, alive: Callable[[], bool],
            say: Callable[[str], None], retry: float = RETRY_S) -> SessionMail | None:
    """Register the session, retried while no identity exists yet; None if the host ended first."""
    told = False
    while alive():
        try:
            mail = SessionMail(identity_folder(), sid)
            mail.register(host, pid)
            return mail
        except NoIdentity as exc:
            if not told:
                say(f"{exc}; waiting for `talk init` (retrying every {retry:g} s)")
                told = True
        time.sleep(retry)
    return None


def host_pid(names: tuple[str, ...], start: int | None = None) -> int:
    """The nearest ancestor whose command names the host (hooks run under a shell).

    Falls back to the parent: a session whose host pid is wrong ends early and its mail goes
    back to the inbox, which is safe.
    """
    found = find_host_pid(names, start)
    return (os.getppid() if start is None else start) if found is None else found


def find_host_pid(names: tuple[str, ...], start: int | None = None) -> int | None:
    """The nearest process from `start` (default: our parent) up whose command names the host,
    or None."""
    pid = os.getppid() if start is None else start
    for _ in range(32):
        if pid <= 1:
            break
        try:
            raw = Path(f"/proc/{pid}/stat").read_text()
            argv0 = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0].decode(errors="replace")
        except OSError:
            break
        comm = raw[raw.index("(") + 1 : raw.rindex(")")]
        # Match the program's own name, never its arguments: `sh -c ".../codex_hook.py"` is
        # a shell that dies with the hook, not the host.
        if comm in names or os.path.basename(argv0) in names:
            return pid
        pid = int(raw[raw.rindex(")") + 2 :].split()[1])
    return None
