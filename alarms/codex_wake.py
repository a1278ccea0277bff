"""Wake an idle Codex thread when peer mail waits for it, through an app-server talk started.

For a thread this process runs through its own `codex app-server` (a TUI's threads are woken by
`alarms.codex_waker`, with `codex queue`).

Hooks run only when a turn does, so mail that arrives while a thread sits idle would wait for
the user's next prompt. The waker starts a turn whose only input is a fixed nudge; the
UserPromptSubmit hook of that turn then hands the mail on through the session's cursor,
framed as peer data. The mail itself is never sent as the turn's input: input typed into a
turn carries the user's authority, and a peer must not get it.

A busy thread is left alone: its Stop hook delivers the mail when the turn ends.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from alarms.codex_waker import NUDGE

if TYPE_CHECKING:
    from pathlib import Path

    from alarms.codex_rpc import AppServer
    from alarms.mailbox import SessionMail

IDLE = "idle"


def should_wake(waiting: int, status: str) -> bool:
    return waiting > 0 and status == IDLE


def thread_status(server: AppServer, thread_id: str) -> str:
    """`idle`, `active`, … as `thread/read` reports it; `unknown` when it says nothing."""
    result: dict[str, Any] = server.request("thread/read", {"threadId": thread_id})
    status = (result.get("thread") or {}).get("status") or {}
    return str(status.get("type", "unknown")) if isinstance(status, dict) else str(status)


def nudge_input() -> list[dict[str, Any]]:
    return [{"type": "text", "text": NUDGE}]


def wake(server: AppServer, thread_id: str, mail: SessionMail) -> str | None:
    """Start a nudge turn in `thread_id` if its mail waits and it is idle; the new turn's id, or None.

    `mail` is the thread's session (Codex's session id is the thread id). Nothing is taken
    here: the hook of the new turn takes the mail, so a turn that fails to start loses nothing.
    """
    if not should_wake(mail.waiting(), thread_status(server, thread_id)):
        return None
    result: dict[str, Any] = server.request("turn/start", {"threadId": thread_id, "input": nudge_input()})
    return str(result["turn"]["id"])


def register_thread(server: AppServer, thread_id: str, folder: Path) -> SessionMail:
    """Give a thread started through `server` its own spool now, for as long as the server runs.

    Codex runs SessionStart only with the thread's first turn, so an idle new thread would not
    be registered yet, and its mail would wait in the inbox where no waker looks.
    """
    from alarms.mailbox import SessionMail

    mail = SessionMail(folder, thread_id)
    mail.register("codex", server.pid)
    return mail
