"""`talk send` and `talk receive`, kept free of typer so the fast lane can run them.

Agents call these two on every turn; everything here imports only what the command needs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from talk.context import Session, open_session, read_text_arg
from talk.output import emit_json, result, warn


def send(user: str | None, relay: str | None, passphrase_file: str | None, name: str, text: str,
         as_json: bool, wait: str | None = None, timeout: float = 30.0, task: bool = False,
         mode: str = "one-shot", hops: list[str] | None = None) -> None:
    """`talk send`: what `send_report` did, as a line or as JSON."""
    report = send_report(open_session(user, relay, passphrase_file), name, read_text_arg(text), wait=wait,
                         timeout=timeout, task=task, mode=mode, hops=hops)
    human = f"sent {report['id']} to {report['to']}" + (f" ({report['state']})" if wait else "")
    if task:
        human += f"; task {report['task']}"
    result(report, human, as_json)


def send_report(s: Session, name: str, original: str, wait: str | None = None, timeout: float = 30.0,
                task: bool = False, mode: str = "one-shot", hops: list[str] | None = None) -> dict[str, Any]:
    """Seal, record in the outbox, deposit; with `wait`, return once a receipt says so.
    Returns {"id", "to", "state"} plus "task" and "hops" when given (what `talk mcp` answers)."""
    import time

    from follower.outbound import Queued, send_queued
    from follower.outbound import send as send_message
    from follower.outbox import Outbox
    from follower.sendrate import spend
    from keys.policy import PolicyBook

    if wait is not None:
        from talk.waiting import check_wanted

        check_wanted(wait)  # before anything is sent
    contact = s.contacts.get(name)
    body = original
    extra: dict[str, Any] = {"hops": hops} if hops else {}
    if task:
        from keys import mesh

        task_id = mesh.new_task_id(s.record.name)
        body = _checked(lambda: mesh.task_envelope(s.record.name, task_id, body, mode))
        extra["task"] = task_id
    spend(s.folder, contact, PolicyBook(s.folder).rule(contact).send_per_min, time.time())
    outbox = Outbox(s.folder)
    send_queued(s.client, outbox)  # what an earlier send left queued goes first
    state = "stored"
    try:
        inner = send_message(s.identity(), s.client, contact, body, outbox=outbox, **extra)
    except Queued as queued:
        # Not an error: the message is kept and will arrive once, with this id. A caller that sent
        # it again would make two; so the answer is success, and stderr says what happened.
        inner, state = queued.inner, "queued"
        warn(f"the relay did not take {inner.id} now ({queued.cause}); it is queued and goes with "
             "the follower, or with your next `talk send` or `talk receive`: do not send it again")
    if task:
        from follower.tasks import TaskLedger

        TaskLedger(s.folder).record("task", "out", contact.fingerprint, contact.name,
                                    {"task": extra["task"], "mode": mode, "text": original}, inner.id)
    report = {"id": inner.id, "to": contact.name, "state": state, **extra}
    if wait is not None and state != "queued":
        from talk.waiting import wait_for

        try:
            report["state"] = wait_for(s, inner.id, wait, timeout)
        except KeyboardInterrupt:
            # Interrupted while waiting: the message is sent all the same; say which one it was.
            emit_json(report)
            raise
    return report


def _checked(build: Callable[[], str]) -> str:
    try:
        return build()
    except ValueError as exc:
        from keys.errors import UserError

        raise UserError(f"cannot send this task: {exc}") from exc


def receive(user: str | None, relay: str | None, passphrase_file: str | None,
            peers: list[str] | None) -> None:
    from follower.channeldb import ChannelDB, SpoolDedup, last_spooled, receiving
    from follower.inbound import Inbox
    from follower.state import running_pid
    from keys.errors import UserError

    s = open_session(user, relay, passphrase_file)
    pid = running_pid(s.folder)
    if pid:
        raise UserError(
            f"a follower (pid {pid}) is taking {s.record.name}'s mail into the spool; read it with "
            "`talk log`, or stop the follower with `talk stop` to use `talk receive`"
        )
    chosen = [s.contacts.get(p) for p in peers] if peers else None
    identity = s.identity()
    from follower.outbound import send_queued
    from follower.outbox import Outbox

    send_queued(s.client, Outbox(s.folder))  # what an earlier send left queued goes now
    # One reader at a time: a second `talk receive` waits, then finds taken what the first took.
    with receiving(s.folder):
        store = ChannelDB(s.folder)
        try:
            seen = SpoolDedup(store, last_spooled(s.folder).__contains__)
            inbox = Inbox(identity, s.client, s.contacts, s.invites, seen, handed_state="delivered")
            report = inbox.receive(emit_json, chosen)
        finally:
            store.close()
    for note in report.notes:
        warn(note)
    # Refused mail is the sender's (or the relay's) fault, not this command's: it is quarantined,
    # everything else was delivered, so the exit status stays 0 and stderr says what was dropped.
    for reason in report.refused:
        warn(f"quarantined: {reason} (see `talk quarantine`)")
