"""Running `talk` with a pty as its terminal, for what it does only there (prompts, colours)."""

from __future__ import annotations

import os
import select
import signal
import time

from tests.conftest import TALK, Agent


def on_a_terminal(agent: Agent, *args: str, typed: list[tuple[str, str]],
                  timeout: float = 60) -> tuple[int, str]:
    """Run `talk ARGS` with a pty as its terminal, typing each answer once its prompt has shown;
    its exit status and everything the terminal showed."""
    import pty

    pid, fd = pty.fork()
    if pid == 0:  # the child: talk on the pty
        os.execve(TALK, [TALK, *args], agent.env())
    shown, answers, seen_up_to = b"", list(typed), 0
    deadline = time.monotonic() + timeout
    while True:
        ready, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
        if not ready:
            os.kill(pid, signal.SIGKILL)
            raise AssertionError(f"talk {' '.join(args)} hung on the terminal; it showed: {shown!r}")
        try:
            chunk = os.read(fd, 4096)
        except OSError:  # the child closed the terminal: it ended
            break
        if not chunk:
            break
        shown += chunk
        if answers and (at := shown.find(answers[0][0].encode(), seen_up_to)) >= 0:
            seen_up_to = at + len(answers[0][0])
            os.write(fd, answers.pop(0)[1].encode() + b"\n")
    _, status = os.waitpid(pid, 0)
    os.close(fd)
    return os.waitstatus_to_exitcode(status), shown.decode(errors="replace")
