"""`talk run codex [ARGS…]`: the Codex TUI with talk's door open from its first second.

A plain Codex TUI keeps its app-server to itself, so nothing outside can reach an idle session
until a hook runs with the user's next prompt. Since 0.145 the app-server can serve several
clients on a Unix socket, and the stock TUI can be one of them. So talk runs, for one session:

1. a private folder (0700) holding the socket: under the identity's folder, or XDG_RUNTIME_DIR
   or the temporary folder when that path would be too long for a Unix socket;
2. `codex app-server --listen unix://SOCK` in a process group of its own (so the terminal's
   signals do not reach it), stopped when the TUI exits. Codex puts the socket itself in a
   0700 folder of its own (0600), and links it at SOCK;
3. the door (`alarms.hosts.codex.remote_door`), a thread of this process connected as a
   second client;
4. the TUI, `codex --remote unix://SOCK ARGS…`, in the foreground of this terminal.

A codex without `--remote` gets exec'd as `codex ARGS…` after a one-line note: its hooks, if
installed, are its doors then. The app-server runs with DOOR_ENV naming the door's lock, so the
hooks it runs stand down while the door lives (`alarms.hosts.codex.hook`).
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from durable.errors import UserError

if TYPE_CHECKING:
    from alarms.hosts.codex.socket_rpc import RemoteClient

__all__ = ["DOOR_ENV", "remote_supported", "run", "socket_folder"]

DOOR_ENV = "TALK_CODEX_DOOR"  # set for the app-server: the lock the door holds while it lives
BIN_ENV = "TALK_CODEX_BIN"  # the codex program, when not the one on PATH
SOCKET, LOCK, SERVER_LOG = "s", "door.lock", "app-server.log"
MAX_SOCKET_PATH = 107  # sun_path holds 108 bytes with the final NUL
START_S = 60.0
STOP_S = 5.0
DOOR_LOG = "door.log"  # in the identity's codex folder (alarms.hosts.codex.tuis.FOLDER)

log = logging.getLogger("talk.alarm.codex")


def remote_supported(help_text: str) -> bool:
    """Whether `codex --help` offers the TUI's `--remote` with a Unix socket (0.145 and later)."""
    return "--remote <" in help_text and "unix://" in help_text


def socket_folder(identity: Path, env: Mapping[str, str]) -> Path:
    """A new private folder (0700) for one session's socket, the first of the identity's folder,
    XDG_RUNTIME_DIR or the temporary folder where the socket's path fits."""
    from alarms.hosts.codex.tuis import FOLDER

    bases = [identity / FOLDER, env.get("XDG_RUNTIME_DIR"), tempfile.gettempdir()]
    for base in bases:
        if not base:
            continue
        longest = len(os.fsencode(Path(base, "run-xxxxxxxx", SOCKET)))
        if longest <= MAX_SOCKET_PATH:
            Path(base).mkdir(mode=0o700, parents=True, exist_ok=True)
            return Path(tempfile.mkdtemp(prefix="run-", dir=base))  # mkdtemp makes it 0700
    raise UserError("no folder short enough for a Unix socket; set XDG_RUNTIME_DIR to a short path")


def find_codex(env: Mapping[str, str]) -> str:
    given = env.get(BIN_ENV)
    found = shutil.which(given or "codex", path=env.get("PATH"))
    if found is None and given and Path(given).is_file():
        found = given
    if found is None:
        raise UserError(f"no codex program found: put codex on PATH, or set {BIN_ENV} to it")
    return found


def offers_remote(codex: str, env: Mapping[str, str]) -> bool:
    try:
        done = subprocess.run([codex, "--help"], env=dict(env), stdin=subprocess.DEVNULL, capture_output=True,
                              timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0 and remote_supported(done.stdout.decode(errors="replace"))


def run(identity: Path, args: Sequence[str], env: Mapping[str, str]) -> int:
    """Run the TUI with the door open (see the module docstring); its exit status."""
    codex = find_codex(env)
    if not offers_remote(codex, env):
        print(f"talk: {codex} has no --remote (Codex 0.145 or later has): starting it without talk's "
              "door; its hooks, if installed, still bring mail", file=sys.stderr)
        sys.stderr.flush()
        os.execve(codex, [codex, *args], dict(env))
    private = socket_folder(identity, env)
    try:
        return _session(identity, private, codex, args, env)
    finally:
        shutil.rmtree(private, ignore_errors=True)


def _session(identity: Path, private: Path, codex: str, args: Sequence[str], env: Mapping[str, str]) -> int:
    from durable.locks import hold_for_life

    lock = hold_for_life(private / LOCK)
    if lock is None:
        raise UserError(f"{private} is in use by another talk run; try again")
    _log_to(identity)
    sock = private / SOCKET
    with _ended_by_signals(), _server(codex, sock, private, {**env, DOOR_ENV: str(private / LOCK)}) as server:
        client = _connect(sock, server)
        tui = subprocess.Popen([codex, "--remote", f"unix://{sock}", *args], env=dict(env))
        from alarms.hosts.codex.remote_door import RemoteDoor

        door = RemoteDoor(identity, client, tui.pid)
        thread = threading.Thread(target=door.run, name="codex-door", daemon=True)
        thread.start()
        try:
            with _keys_to_the_tui():
                status = tui.wait()
        finally:
            _end(tui)
            door.stop.set()
            thread.join(timeout=10.0)
            client.close()
    os.close(lock)
    return 128 - status if status < 0 else status


def _log_to(identity: Path) -> None:
    from alarms.hosts.codex.tuis import FOLDER
    from durable.daemon import setup_logging

    (identity / FOLDER).mkdir(mode=0o700, exist_ok=True)
    setup_logging(identity / FOLDER / DOOR_LOG, to_stderr=False)


@contextlib.contextmanager
def _server(codex: str, sock: Path, private: Path,
            env: Mapping[str, str]) -> Iterator[subprocess.Popen[bytes]]:
    """The app-server, in its own session, stopped (its whole group) when the block ends."""
    with open(private / SERVER_LOG, "ab") as out:
        server = subprocess.Popen([codex, "app-server", "--listen", f"unix://{sock}"], env=dict(env),
                                  stdin=subprocess.DEVNULL, stdout=out, stderr=out, start_new_session=True)
    try:
        yield server
    finally:
        _stop(server)


def _stop(server: subprocess.Popen[bytes]) -> None:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(server.pid, sig)
        try:
            server.wait(timeout=STOP_S)
            break
        except subprocess.TimeoutExpired:
            continue
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(server.pid, signal.SIGKILL)  # what the npm wrapper's native binary left behind


def _connect(sock: Path, server: subprocess.Popen[bytes]) -> RemoteClient:
    from alarms.hosts.codex.socket_rpc import RemoteClient, RpcError

    deadline = time.monotonic() + START_S
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise UserError(f"codex app-server exited ({server.returncode}) before listening: "
                            f"{_last_line(sock.parent / SERVER_LOG)}")
        if sock.exists():
            try:
                return RemoteClient(str(sock))
            except RpcError:
                pass  # listening, not yet answering
        time.sleep(0.05)
    raise UserError(f"codex app-server did not listen on {sock} within {START_S:.0f} s")


def _last_line(path: Path) -> str:
    try:
        lines = [ln for ln in path.read_text(errors="replace").splitlines() if ln.strip()]
    except OSError:
        return "no log"
    errors = [ln for ln in lines if ln.startswith("Error")]
    return (errors or lines or ["no output"])[-1]


class Ended(Exception):
    """talk was told to end (the terminal hung up, or SIGTERM) while the TUI ran."""


def _ended(signum: int, _frame: Any) -> None:
    raise Ended(signum)


@contextlib.contextmanager
def _ended_by_signals() -> Iterator[None]:
    """A hang-up or SIGTERM ends talk the orderly way, so the app-server it started goes too."""
    old = {sig: signal.signal(sig, _ended) for sig in (signal.SIGHUP, signal.SIGTERM)}
    try:
        yield
    except Ended as exc:
        raise SystemExit(128 + int(exc.args[0])) from None
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)


@contextlib.contextmanager
def _keys_to_the_tui() -> Iterator[None]:
    """Ctrl-C and Ctrl-\\ in the terminal are the TUI's to handle; talk waits for it to exit."""
    old = {sig: signal.signal(sig, signal.SIG_IGN) for sig in (signal.SIGINT, signal.SIGQUIT)}
    try:
        yield
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)


def _end(tui: subprocess.Popen[bytes]) -> None:
    """The TUI, if it still runs (talk was told to end): asked to end, then made to."""
    if tui.poll() is not None:
        return
    tui.terminate()
    try:
        tui.wait(timeout=STOP_S)
    except subprocess.TimeoutExpired:
        tui.kill()
        tui.wait()

