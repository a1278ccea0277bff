"""`talk run copilot [ARGS…]`: Copilot CLI in this terminal, with a door that brings peer mail into
its idle session from the first second (`ui_door`); in a turn, the hooks of `talk install copilot`
hand it on after each tool call.

The door needs Copilot's TUI+server mode, `copilot --ui-server --port N` (not in `--help`; Copilot
CLI 1.0.102 has it): the full TUI, plus the SDK's JSON-RPC server on 127.0.0.1:N. That server asks
for no credential in this mode: the embedded server is started without a connection token (a
`connect` that offers one is answered AUTHENTICATION_NOT_CONFIGURED; COPILOT_CONNECTION_TOKEN is
read only by the headless `--server`), and requests need no handshake at all. Any local user can
therefore reach the port and drive the session, with the user's rights. So the door opens only
when the user says so (--allow-local-port); without it this command refuses and says why.

Copilot without `--ui-server` runs as plain `copilot ARGS…`, with a note: its hooks still bring mail
with each prompt and tool call. Notes from the door go to `copilot-door.log` in the identity
folder and are printed when Copilot ends: nothing may write over the TUI.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from durable.errors import UserError

__all__ = ["run"]

LOG_NAME = "copilot-door.log"
PROBE_S = 120.0  # a first run unpacks Copilot's bundle into ~/.cache first
REFUSED = ("Copilot CLI's --ui-server port has no authentication, so any local user could drive "
           "this session through it: run `talk run copilot --allow-local-port [ARGS…]` to accept "
           "that, or plain `copilot` (its hooks still bring mail with each prompt).")
# Arguments that choose another mode than the TUI, or the server's own port.
NOT_WITH_DOOR = ("--ui-server", "--port", "--server", "--headless", "--acp", "--stdio", "-p", "--prompt")


def program(env: Mapping[str, str]) -> str:
    found = shutil.which("copilot", path=env.get("PATH"))
    if found is None:
        raise UserError("Copilot CLI (`copilot`) is not on PATH: install it (npm install -g @github/copilot)")
    return found


def has_ui_server(copilot: str, env: Mapping[str, str]) -> bool:
    """Whether this Copilot knows `--ui-server`: an unknown flag fails even `--version`."""
    try:
        done = subprocess.run([copilot, "--ui-server", "--version"], env=dict(env), capture_output=True,
                              timeout=PROBE_S, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


def free_port() -> int:
    """A loopback port free now; the door checks who listens there before it sends a byte."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Notes:
    """The door's lines for the user: logged now, printed once Copilot has the terminal back."""

    def __init__(self, folder: Path) -> None:
        self.path, self.lines = folder / LOG_NAME, list[str]()
        self.lock = threading.Lock()

    def say(self, line: str) -> None:
        with self.lock:
            if line in self.lines:
                return
            self.lines.append(line)
            with contextlib.suppress(OSError), open(self.path, "a", encoding="utf-8") as f:
                f.write(f"{time.strftime('%Y-%m-%dT%H:%M:%S')} {line}\n")

    def show(self) -> None:
        for line in self.lines:
            print(f"talk: {line}", file=sys.stderr)


def foreground(argv: list[str], env: Mapping[str, str]) -> subprocess.Popen[bytes]:
    """Start `argv` on this terminal. Ctrl-C is Copilot's (the terminal sends it to both)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    return subprocess.Popen(argv, env=dict(env))


def wait(proc: subprocess.Popen[bytes]) -> int:
    code = proc.wait()
    return 128 - code if code < 0 else code


def run(folder: Path, args: Sequence[str], env: Mapping[str, str], given: Mapping[str, Any]) -> int:
    """Copilot CLI with the door open (or plain, where it cannot be); its exit status."""
    copilot = program(env)
    notes = Notes(folder)
    if not has_ui_server(copilot, env):  # no port to open: nothing to opt into
        notes.say("this Copilot CLI has no --ui-server; running it plain (mail comes with its hooks)")
        notes.show()
        return wait(foreground([copilot, *args], env))
    if not given.get("allow_local_port"):
        raise UserError(REFUSED)
    clash = [a for a in args if a.split("=", 1)[0] in NOT_WITH_DOOR]
    if clash:
        raise UserError(f"talk run copilot chooses Copilot's mode and port itself; leave out {clash[0]}")
    from alarms.hosts.copilot.ui_door import UiDoor

    port = free_port()
    proc = foreground([copilot, "--ui-server", "--port", str(port), *args], env)
    door = UiDoor(folder, port, os.getcwd(), proc.pid, lambda: proc.poll() is None, notes.say)
    thread = threading.Thread(target=door.run, name="copilot-door", daemon=True)
    thread.start()
    try:
        return wait(proc)
    finally:
        door.stop()
        thread.join(timeout=5)
        notes.show()
