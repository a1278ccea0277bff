"""Calls awaiting their answers: the table every JSON-RPC client of a host keeps, whatever
carries its messages (a pipe, a WebSocket on a Unix socket, a TCP stream with Content-Length
headers).

A caller takes an id, sends its request and waits for the answer with that id; the client's
reader thread files each answer it reads, and says when the connection is gone, so no caller
waits out its timeout for a server that has already left. Standard library only: doors import it.
"""

from __future__ import annotations

import threading
import time
from typing import Any

__all__ = ["Calls", "NoAnswer"]

Answer = dict[str, Any]


class NoAnswer(Exception):
    """No answer came: the timeout passed (`late`), or the connection ended first."""

    def __init__(self, late: bool) -> None:
        super().__init__("late" if late else "gone")
        self.late = late


class Calls:
    """`changed` is the condition the client waits on for anything its reader files (a client
    that keeps notifications too waits on it for those)."""

    def __init__(self) -> None:
        self.changed = threading.Condition()
        self._next = 0
        self._answers: dict[int, Answer] = {}
        self._gone = False

    def new_id(self) -> int:
        with self.changed:
            self._next += 1
            return self._next

    def answered(self, answer: Answer) -> None:
        """The reader read the answer to call `answer["id"]`."""
        with self.changed:
            self._answers[answer["id"]] = answer
            self.changed.notify_all()

    def gone(self) -> None:
        """The reader saw the connection end: every call still waiting gets NoAnswer now."""
        with self.changed:
            self._gone = True
            self.changed.notify_all()

    @property
    def is_gone(self) -> bool:
        return self._gone

    def wait(self, call_id: int, timeout: float) -> Answer:
        """The answer to call `call_id`, once it came; NoAnswer after `timeout`, or at once when
        the connection has ended without it."""
        deadline = time.monotonic() + timeout
        with self.changed:
            while call_id not in self._answers:
                left = deadline - time.monotonic()
                if left <= 0 or self._gone:
                    raise NoAnswer(late=left <= 0)
                self.changed.wait(left)
            return self._answers.pop(call_id)
