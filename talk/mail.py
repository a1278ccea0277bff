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
    """`talk send`: what `send_report` did, as a line or as JSON. If waiting for a receipt ends
    badly (Ctrl-C, a timeout, a relay error), the message was sent all the same: its report is
    printed before the error, so a caller knows its id and does not send it again."""
    sent: dict[str, Any] = {}
    try:
        report = send_report(open_session(user, relay, passphrase_file), name, read_text_arg(text),
                             wait=wait, timeout=timeout, task=task, mode=mode, hops=hops, progress=sent)
    except BaseException:
        if sent:
            result(sent, _human(sent, wait, task), as_json)
        raise
    result(report, _human(report, wait, task), as_json)


def _human(report: dict[str, Any], wait: str | None, task: bool) -> str:
    human = f"sent {report['id']} to {report['to']}" + (f" ({report['state']})" if wait else "")
    return human + (f"; task {report['task']}" if task else "")


def send_report(s: Session, name: str, original: str, wait: str | None = None, timeout: float = 30.0,
                task: bool = False, mode: str = "one-shot", hops: list[str] | None = None,
                progress: dict[str, Any] | None = None) -> dict[str, Any]:
    """Seal, record in the outbox, deposit; with `wait`, return once a receipt says so.
    Returns {"id", "to", "state"} plus "task" and "hops" when given (what `talk mcp` answers);
    `progress` gets the same as soon as the message is sent, before any wait.

    Raises:
        TimedOut: the wait ended (its time, or a relay error while waiting); the message was sent
            and the error says so, with its id.
    """
    import time

    from durable.errors import RelayError, TimedOut
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

        if progress is not None:
            progress.update(report)
        try:
            report["state"] = wait_for(s, inner.id, wait, timeout)
        except (TimedOut, RelayError) as exc:
            # Sent all the same: a failure here must not read as "not sent" to a caller that retries.
            raise TimedOut(f"{exc} (message {inner.id} was sent: do not send it again)") from exc
    return report


def _checked(build: Callable[[], str]) -> str:
    try:
        return build()
    except ValueError as exc:
        from durable.errors import UserError

        raise UserError(f"cannot send this task: {exc}") from exc


def receive(user: str | None, relay: str | None, passphrase_file: str | None,
            peers: list[str] | None) -> None:
    from durable.errors import UserError
    from follower.channeldb import ChannelDB, SpoolDedup, last_spooled, receiving
    from follower.inbound import Inbox
    from follower.state import running_pid

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
    if s.client.republished_at is not None:
        warn("the relay had lost your keys (its store may have restarted empty); they were "
             "published again, so your contacts can write to you")
    # Refused mail is the sender's (or the relay's) fault, not this command's: it is quarantined,
    # everything else was delivered, so the exit status stays 0 and stderr says what was dropped.
    for reason in report.refused:
        warn(f"quarantined: {reason} (see `talk quarantine`)")
