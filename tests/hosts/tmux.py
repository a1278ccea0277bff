"""An interactive host program in a tmux server of its own, for the tests that need a terminal.

Each `Tmux` has its own server socket (`-L`), so killing it ends that program's whole tree and
never another test's; screens are read with `capture-pane`, keys typed with `send-keys`.
"""

from __future__ import annotations

import subprocess
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from tests.conftest import wait_for
from tests.hosts.npm import not_ci
from tests.hosts.procs import kill_tree

WINDOW = "host"
# A host program's first screen: node loading a large bundle on a machine busy with other
# tests can take well over a minute before it draws anything.
START_S = 180.0


class Ended(AssertionError):
    """The program in the window exited: what was waited for will never be drawn."""


class Tmux:
    """`Tmux(env).start(cwd, argv)` runs argv in a 160 by 45 window; `kill()` ends it and its children."""

    def __init__(self, env: dict[str, str], label: str = "host") -> None:
        self.socket, self.env = f"talk-{label}-{uuid.uuid4().hex[:10]}", not_ci(env)

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["tmux", "-L", self.socket, *args], env=self.env, capture_output=True,
                              text=True, timeout=30)

    def start(self, cwd: Path, argv: list[str]) -> Tmux:
        # remain-on-exit, set in the same command list before the program starts: a program that
        # dies at start-up leaves its last screen (its error) and its exit status to report,
        # instead of a server that is gone and a blank screen.
        started = self.run("start-server", ";", "set-option", "-g", "remain-on-exit", "on", ";",
                           "new-session", "-d", "-s", WINDOW, "-x", "160", "-y", "45", "-c", str(cwd), *argv)
        assert started.returncode == 0, started.stderr
        return self

    def ended(self) -> str | None:
        """How the program ended ("exited with status N"), or None while it runs."""
        fmt = "#{pane_dead} #{pane_dead_status}"
        out = self.run("display-message", "-p", "-t", WINDOW, fmt).stdout.split()
        if not out:
            return "gone, with its tmux server"
        if out[0] != "1":
            return None
        # tmux marks the pane dead when its terminal closes and learns the exit status when it
        # reaps the child, a moment later: until then the program is still ending.
        return f"exited with status {out[1]}" if len(out) > 1 else None

    def program_gone(self, pid: int) -> bool:
        """Whether the pane's program `pid` has exited (gone, or a zombie tmux has not reaped).
        tmux marks a pane dead only once its terminal closes, which a child the program left on
        it can delay well past the program's own end."""
        try:
            with open(f"/proc/{pid}/stat") as f:
                return f.read().rsplit(")", 1)[1].split()[0] == "Z"
        except (OSError, IndexError):
            return True

    def screen(self) -> str:
        return self.run("capture-pane", "-p", "-t", WINDOW).stdout

    def wait_shown(self, text: str, timeout: float = START_S, what: str = "") -> str:
        """Wait until `text` is on the screen and return the screen; on a timeout, fail with the
        screen as it was, so a dialog or an error the program drew instead is in the report."""
        def shown() -> str | None:
            screen = self.screen()
            if text in screen:
                return screen
            ended = self.ended()
            if ended is not None:  # it will never draw it: say so now, not after the timeout
                raise Ended(f"the program {ended} before showing {text!r}; the screen:\n{screen}")
            return None

        try:
            return wait_for(shown, timeout, what or f"{text!r} on the screen", step=0.2)
        except Ended:
            raise
        except AssertionError as exc:
            raise AssertionError(f"{exc}; the program: {self.ended() or 'running'}; the screen:\n"
                                 f"{self.screen()}") from None

    def start_shown(self, cwd: Path, argv: list[str], text: str, what: str = "") -> str:
        """Start argv and wait until `text` is on the screen, starting it once more if the first
        start died or drew nothing: a host program's own start-up, not talk, is what that
        covers (it once left a blank screen under a loaded CI run). The first failure is kept
        in the second's report."""
        self.start(cwd, argv)
        try:
            return self.wait_shown(text, what=what)
        except AssertionError as first:
            self.kill()
            self.start(cwd, argv)
            try:
                return self.wait_shown(text, what=what)
            except AssertionError as second:
                raise AssertionError(f"{second}\n(a first start failed too: {first})") from None

    def keys(self, *keys: str) -> None:
        self.run("send-keys", "-t", WINDOW, *keys)

    def type(self, text: str) -> None:
        """Type `text`, then Enter once the text is on screen (keys sent at once read as a paste)."""
        self.keys("-l", text)
        wait_for(lambda: text in self.screen(), 30, f"{text!r} on the screen")
        self.keys("Enter")

    def submit(self, text: str, taken: Callable[[], object], timeout: float = 90.0,
               every: float = 15.0) -> None:
        """Type `text` and Enter, then press Enter again every `every` seconds until `taken()`
        holds. On a loaded machine a TUI can take the Enter as part of the typed burst (a
        paste) and keep the text in its input; an Enter on an empty input does nothing, so the
        repeat is harmless once the text went."""
        self.type(text)
        deadline = time.monotonic() + timeout
        while True:
            try:
                wait_for(taken, min(every, max(deadline - time.monotonic(), 0.1)), f"{text!r} taken")
                return
            except AssertionError as exc:
                if time.monotonic() >= deadline:
                    screen = self.screen()
                    raise AssertionError(f"{text!r} typed, never taken; the screen:\n{screen}") from exc
                self.keys("Enter")

    def _number(self, fmt: str) -> int | None:
        out = self.run("display-message", "-p", "-t", WINDOW, fmt).stdout.strip()
        return int(out) if out.isdigit() else None

    def pane_pid(self) -> int | None:
        """The program's own pid (the pane's first process)."""
        return self._number("#{pane_pid}")

    def kill(self) -> None:
        server = self._number("#{pid}")
        socket_path = self.run("display-message", "-p", "#{socket_path}").stdout.strip()
        self.run("kill-server")
        if server is not None:
            kill_tree(server)
        if socket_path:
            Path(socket_path).unlink(missing_ok=True)
