"""What the Codex host tests share: the config that lets a tool call run at once, the thread's own
requests to the fake model, "exactly once" read off them, and waiting for a turn to end."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from alarms.hosts.codex.turns import TurnLog
from tests.conftest import wait_for

EXTRA_CONFIG = 'approval_policy = "never"\nsandbox_mode = "danger-full-access"\n'


def argv_of(pid: int) -> list[str]:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
    except OSError:
        return []


def thread_requests(model: Any, sid: str) -> list[dict[str, Any]]:
    """The thread's own requests (Codex's title request runs under another session id)."""
    return [r for r in model.requests if r["headers"].get("session-id") == sid]


def carried(requests: list[dict[str, Any]], needle: str) -> list[int]:
    return [sum(t.count(needle) for t in r["texts"] + r["system_texts"]) for r in requests]


def assert_once(requests: list[dict[str, Any]], needle: str) -> int:
    """`needle` is new in one request and carried once by each one after it: its index."""
    counts = carried(requests, needle)
    assert any(counts), counts
    first = next(i for i, c in enumerate(counts) if c)
    assert counts[first:] == [1] * (len(counts) - first), counts
    return first


def wait_idle(rollout: TurnLog, turns: int) -> None:
    def idle() -> bool:
        now = rollout.look()
        return now is not None and now.started >= turns and now.busy is False

    wait_for(idle, 60, f"turn {turns} to end")
