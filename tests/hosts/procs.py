"""Start host processes in their own sessions and make sure every one of them dies.

Hosts spawn helpers that outlive them (opencode's npm installs, Claude Code's `--bg` pty
hosts, plugin monitors), so cleanup is by process group, then by descendants, then by
`HOME=` in /proc/<pid>/environ. Every kill names a pid; nothing is killed by name.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

Output = Path | int | None


def _state(pid: int) -> str | None:
    """The /proc state letter of pid, or None when it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat[stat.rfind(")") + 2]


def alive(pid: int) -> bool:
    state = _state(pid)
    return state is not None and state not in "ZX"


def _table() -> list[tuple[int, int, int]]:
    """(pid, ppid, pgid) of every process."""
    rows = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2 :].split()
        rows.append((int(entry.name), int(fields[1]), int(fields[2])))
    return rows


def descendants(pid: int) -> list[int]:
    rows = _table()
    found, todo = [], [pid]
    while todo:
        parent = todo.pop()
        for child, ppid, _ in rows:
            if ppid == parent:
                found.append(child)
                todo.append(child)
    return found


def group_members(pgid: int) -> list[int]:
    return [pid for pid, _, group in _table() if group == pgid]


def _signal(pids: Sequence[int], group: int | None, sig: int) -> None:
    if group is not None:
        with contextlib.suppress(OSError):
            os.killpg(group, sig)
    for p in pids:
        with contextlib.suppress(OSError):
            os.kill(p, sig)


def kill_pids(pids: Sequence[int], group: int | None = None, grace: float = 3.0) -> None:
    """SIGTERM pids (and process group `group`), then SIGKILL whatever is left after `grace`."""
    _signal(pids, group, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and any(alive(p) for p in pids):
        time.sleep(0.05)
    _signal([p for p in pids if alive(p)], group, signal.SIGKILL)


def kill_tree(pid: int, grace: float = 3.0) -> None:
    """Kill pid, every descendant (even setsid'd ones) and the process group pid leads, if any.

    Signalling group `pid` is safe even when pid is gone: Linux does not reuse a pid
    while a process group of that id still exists.
    """
    pids = sorted({pid, *descendants(pid), *group_members(pid)})
    kill_pids(pids, pid, grace)


def pids_with_home(home: Path) -> list[int]:
    wanted = {f"HOME={home}".encode(), f"HOME={home.resolve()}".encode()}
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            environ = (entry / "environ").read_bytes()
        except OSError:
            continue
        if wanted & set(environ.split(b"\0")) and alive(int(entry.name)):
            found.append(int(entry.name))
    return found


def reap_home(home: Path, grace: float = 3.0) -> list[int]:
    """Kill every process still running with HOME=home; return their pids."""
    found = pids_with_home(home)
    kill_pids(found, None, grace)
    return found


def tail(path: Path, chars: int = 2000) -> str:
    try:
        return path.read_text(errors="replace")[-chars:]
    except OSError:
        return "<no output file>"


def wait_for_text(
    path: Path, pattern: str, timeout: float, proc: subprocess.Popen[Any] | None = None
) -> re.Match[str]:
    """Poll a log file until `pattern` matches; fail early if `proc` exits first."""
    regex = re.compile(pattern)
    deadline = time.monotonic() + timeout
    while True:
        text = path.read_text(errors="replace") if path.exists() else ""
        match = regex.search(text)
        if match:
            return match
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"process exited {proc.returncode} before /{pattern}/:\n{text[-2000:]}")
        if time.monotonic() > deadline:
            raise AssertionError(f"no /{pattern}/ in {path.name} after {timeout}s:\n{text[-2000:]}")
        time.sleep(0.05)


class ProcessGroup:
    """Processes started in new sessions; `stop()` kills each one's tree by pid."""

    def __init__(self) -> None:
        self.procs: list[subprocess.Popen[str]] = []
        self._files: list[IO[str]] = []

    def _open(self, out: Output) -> int | IO[str] | None:
        if not isinstance(out, Path):
            return out
        handle = out.open("a")
        self._files.append(handle)
        return handle

    def start(
        self,
        args: Sequence[str | Path],
        *,
        cwd: Path,
        env: dict[str, str],
        stdin: int | None = subprocess.DEVNULL,
        stdout: Output = subprocess.DEVNULL,
        stderr: Output = subprocess.DEVNULL,
    ) -> subprocess.Popen[str]:
        """Start args; a Path for stdout/stderr is a log file (appended, closed on stop)."""
        proc = subprocess.Popen(
            [str(a) for a in args], cwd=cwd, env=env, stdin=stdin, stdout=self._open(stdout),
            stderr=self._open(stderr), text=True, start_new_session=True,
        )
        self.procs.append(proc)
        return proc

    def run(
        self, args: Sequence[str | Path], *, cwd: Path, env: dict[str, str], timeout: float,
        input: str | None = None,
    ) -> subprocess.CompletedProcess[str]:
        """Run to completion with captured output; on timeout kill the tree and fail the test."""
        proc = self.start(
            args, cwd=cwd, env=env, stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )
        try:
            out, err = proc.communicate(input, timeout=timeout)
        except subprocess.TimeoutExpired:
            kill_tree(proc.pid)
            out, err = proc.communicate()
            report = f"{args[0]} timed out after {timeout}s\nstdout:\n{out}\nstderr:\n{err}"
            raise AssertionError(report) from None
        finally:
            kill_tree(proc.pid, grace=1.0)
        return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)

    def stop(self, grace: float = 3.0) -> None:
        for proc in self.procs:
            kill_tree(proc.pid, grace)
            proc.wait()
            for pipe in (proc.stdin, proc.stdout, proc.stderr):
                if pipe is not None:
                    pipe.close()
        for handle in self._files:
            handle.close()
        self.procs, self._files = [], []

    def __enter__(self) -> ProcessGroup:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
