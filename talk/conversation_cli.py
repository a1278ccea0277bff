"""The conversation commands: outbox, message status, policy, held mail, tasks, reply, forward."""

from __future__ import annotations

import sys
from datetime import datetime
from typing import Annotated, Any

import typer

from durable.message_ids import short
from talk.help_format import TalkTyper
from talk.options import Json, PassFile, Relay, User
from talk.output import emit_json, result

held_app = TalkTyper(help="Mail kept aside by policy or rate: list, accept or drop it.")
Yes = Annotated[bool, typer.Option("--yes", help="Do it without asking (needed off a terminal).")]
Which = Annotated[str, typer.Argument(
    metavar="ID|all", help="A held message's id as `talk held` shows it (or 6+ of its first characters), "
    "or all.")]


def _when(ts: float) -> str:
    return datetime.fromtimestamp(ts).strftime("%Y-%m-%d %H:%M:%S") if ts else "?"


def agreed(question: str, yes: bool) -> bool:
    """Whether a person said yes: --yes, or a yes at a terminal prompt; off a terminal, no."""
    return yes or (sys.stdin.isatty() and typer.confirm(question, default=False))


def confirm(question: str, yes: bool) -> None:
    """Trust changes need a person: a prompt on a terminal, else an explicit --yes."""
    from durable.errors import UserError

    if agreed(question, yes):
        return
    if not sys.stdin.isatty():
        raise UserError(f"{question.rstrip('?')}: not done without --yes when not run on a terminal "
                        "(so an agent cannot widen its own trust by accident)")
    raise UserError("cancelled; nothing changed")


def outbox(
    limit: Annotated[int, typer.Option(
        "--limit", metavar="N", help="Show the newest N messages (0: all read).")] = 50,
    everything: Annotated[bool, typer.Option(
        "--all", help="Read the whole history, not only recent messages (slower with a long one).",
    )] = False,
    offline: Annotated[bool, typer.Option(
        "--offline", help="Do not fetch waiting receipts first; show what the outbox knew.",
    )] = False,
    cancel: Annotated[str | None, typer.Option(
        "--cancel", metavar="ID", help="Cancel a file transfer whose message has not gone (its id, or 6+ "
        "of its first characters): its record and keys are erased; what reached the relay expires there.",
    )] = None,
    user: User = None, relay: Relay = None, passphrase_file: PassFile = None, as_json: Json = False,
) -> None:
    """List sent messages and how far each got: sent, stored, held, spooled, written, delivered, or refused.

    Receipts waiting on the relay are fetched first (the follower's job when one runs). File
    transfers not announced yet show first: uploading, or stalled with the reason and what to do."""
    from talk.context import open_account
    from talk.output import warn

    account = open_account(user, relay, passphrase_file)
    if cancel is not None:
        _cancel(account.folder, account.outbox, cancel, as_json)
        return
    heard = None if offline else account.take_receipts()
    if heard:
        warn(heard)
    box = account.outbox
    entries = sorted((box.everything() if everything else box.recent()).values(), key=lambda e: e.ts)
    shown = entries[-limit:] if limit > 0 else entries
    from follower.send.transfer import TransferBook, progress_line

    uploading = list(TransferBook(account.folder).pending())  # messages whose files are not up yet
    if as_json:
        emit_json([e.public() for e in shown] + [t.summary() for t in uploading])
        return
    for transfer in uploading:
        result({}, progress_line(transfer.summary()), False)
    if not shown and not uploading:
        result({}, "no messages sent yet", False)
    for e in shown:
        why = f" ({e.reason})" if e.reason else ""
        tries = f", {e.attempts} tries" if e.attempts > 1 else ""
        text = e.text.splitlines()[0][:60] if e.text else ""
        result({}, f"{_when(e.ts)}  {short(e.id)}  to {e.name:<12} {e.state:<9}{tries}{why}  {text}", False)


def _cancel(folder: Any, box: Any, typed: str, as_json: bool) -> None:
    from follower.send.cancel import cancel
    from follower.send.transfer import TransferBook

    gone = cancel(TransferBook(folder), box.everything(), typed)
    row = {"id": gone.id, "to": gone.name, "state": "cancelled", "bytes_sent": gone.sent_bytes}
    left = (f"; the {gone.sent_bytes / 1e6:.1f} MB already uploaded stay sealed on the relay until it "
            f"expires them (only {gone.name} can delete them there, and no one can open them now)"
            if gone.sent_bytes else "")
    result(row, f"cancelled {short(gone.id)} to {gone.name}: its record and keys are erased, the message "
                f"will not be sent{left}", as_json)


def message_status(folder: Any, msg_id: str, as_json: bool) -> None:
    from follower.groups.group_mail import group_status
    from follower.send.outbox import Outbox

    outbox = Outbox(folder)
    group = group_status(outbox, msg_id)
    if group is not None:  # a group message: one copy per member, each with its own receipts
        lines = [f"{c['id']} to {c['name']}: {c['state']}" + (f": {c['reason']}" if c["reason"] else "")
                 for c in group["members"]]
        result(group, f"group message {group['gm']} to @{group['group']}:\n" + "\n".join(lines), as_json)
        return
    entry = outbox.pick(msg_id)
    why = f": {entry.reason}" if entry.reason else ""
    result(entry.public(), f"{entry.id} to {entry.name}: {entry.state}{why} (updated {_when(entry.updated)}, "
                           f"{entry.attempts} attempt{'s' if entry.attempts != 1 else ''})", as_json)


def policy(
    name: Annotated[str | None, typer.Argument(
        metavar="NAME", help="Contact name (or fingerprint); omit to list every contact's.",
        show_default=False)] = None,
    choice: Annotated[str | None, typer.Argument(
        metavar="accept|hold|refuse", help="What their mail may do (omit to show).")] = None,
    tasks: Annotated[bool | None, typer.Option(
        "--tasks/--no-tasks", help="Frame their task envelopes as tasks from a trusted device.")] = None,
    receive_rate: Annotated[int | None, typer.Option(
        "--receive-rate", metavar="N", help="Most messages a minute taken from them; the excess is held.",
    )] = None,
    send_rate: Annotated[int | None, typer.Option(
        "--send-rate", metavar="N", help="Most messages a minute `talk send` sends them.")] = None,
    yes: Yes = False, user: User = None, as_json: Json = False,
) -> None:
    """Show or set what a contact's mail may do here; every change is logged in trust.log."""
    from durable.errors import UserError
    from follower.policy import Policy, PolicyBook
    from talk.context import open_account

    account = open_account(user, None, None)
    book = PolicyBook(account.folder)
    asks_a_change = not (choice is None and tasks is None and receive_rate is None and send_rate is None)
    if name is None:
        if asks_a_change:
            raise UserError("name the contact to change: talk policy NAME [accept|hold|refuse] ...")
        rows = [{"name": c.name, **book.rule(c).to_json()} for c in account.contacts.all()]
        lines = [_rule_line(r["name"], r) for r in rows] or ["no contacts yet; see talk invite and talk join"]
        result({"policies": rows}, "\n".join(lines), as_json)
        return
    contact = account.contacts.get(name)
    if not asks_a_change:
        rule = book.rule(contact)
        result({"name": contact.name, **rule.to_json()}, _rule_line(contact.name, rule.to_json()), as_json)
        return
    try:
        chosen = None if choice is None else Policy(choice)
    except ValueError as exc:
        raise UserError(f"policy must be accept, hold or refuse, not {choice!r}") from exc
    confirm(f"Change what {contact.name}'s mail may do here?", yes)
    before, after = book.change(contact, policy=chosen, tasks=tasks, receive_per_min=receive_rate,
                                send_per_min=send_rate)
    result({"name": contact.name, "before": before.to_json(), **after.to_json()},
           _rule_line(contact.name, after.to_json()), as_json)


def _rule_line(name: str, rule: dict[str, Any]) -> str:
    tasks = "tasks trusted" if rule["tasks"] else "tasks shown as plain text"
    return (f"{name}: {rule['policy']}, {tasks}, receive ≤ {rule['receive_per_min']}/min, "
            f"send ≤ {rule['send_per_min']}/min")


@held_app.callback(invoke_without_command=True)
def held(ctx: typer.Context, user: User = None, as_json: Json = False) -> None:
    """List held mail (kept aside, not yet seen by any agent)."""
    if ctx.invoked_subcommand is not None:
        return
    from follower.held import HeldBox
    from talk.context import open_account

    box = HeldBox(open_account(user, None, None).folder).all()
    rows = [{"id": i, "name": e["record"].get("name"), "from": e["record"].get("from"),
             "reason": e["reason"], "held_at": e["held_at"], "text": e["record"].get("text", "")}
            for i, e in sorted(box.items(), key=lambda kv: kv[1]["held_at"])]
    if as_json:
        emit_json(rows)
        return
    if not rows:
        result({}, "no held mail", False)
    for r in rows:
        result({}, f"{_when(r['held_at'])}  {short(r['id'])}  from {r['name']}: "
                   f"{str(r['text']).splitlines()[0][:60] if r['text'] else ''}  ({r['reason']})", False)


@held_app.command("accept")
def held_accept(
    which: Which, yes: Yes = False, user: User = None, relay: Relay = None, passphrase_file: PassFile = None,
    as_json: Json = False,
) -> None:
    """Release held mail into the spool, where the agents' doors take it."""
    _release(which, "spooled", yes, user, relay, passphrase_file, as_json)


@held_app.command("drop")
def held_drop(
    which: Which, yes: Yes = False, user: User = None, relay: Relay = None, passphrase_file: PassFile = None,
    as_json: Json = False,
) -> None:
    """Delete held mail unread by any agent; each sender is told it was dropped."""
    _release(which, "dropped", yes, user, relay, passphrase_file, as_json)


def _release(which: str, state: str, yes: bool, user: str | None, relay: str | None,
             passphrase_file: str | None, as_json: bool) -> None:
    from talk.context import open_account

    account = open_account(user, relay, passphrase_file)
    ids = account.held_ids(which)
    verb = "release into the spool" if state == "spooled" else "drop"
    confirm(f"{verb.capitalize()} {len(ids)} held message{'s' if len(ids) != 1 else ''}?", yes)
    failed = account.release(ids) if state == "spooled" else account.drop(ids)
    note = "; the senders will learn it on their resend" if failed else ""
    done = "released into the spool" if state == "spooled" else "dropped"
    result({state: ids}, f"{done}: {len(ids)} message{'s' if len(ids) != 1 else ''}{note}", as_json)


def tasks(user: User = None, as_json: Json = False) -> None:
    """Tasks sent and received (opencode-mesh envelopes), each with its latest status."""
    from follower.tasks.ledger import TaskLedger
    from talk.context import open_account

    rows = TaskLedger(open_account(user, None, None).folder).rows()
    if as_json:
        emit_json(rows)
        return
    if not rows:
        result({}, "no tasks yet", False)
    for r in rows:
        who = f"to {r['name']}" if r["asked_by"] == "me" else f"from {r['name']}"
        retry = f" ({r['retries']} retries)" if r["retries"] else ""
        summary = f": {r['summary'].splitlines()[0][:60]}" if r["summary"] else ""
        result({}, f"{r['task']}  {who:<16} {r['status']}{retry}{summary}", False)


def reply(
    task: Annotated[str, typer.Argument(
        metavar="TASK", help="The task id to answer, as `talk tasks` shows it.")],
    status: Annotated[str, typer.Option(
        "--status", metavar="done|partial|failed", help="How the task went.")],
    summary: Annotated[str, typer.Option(
        "--summary", metavar="TEXT", help="The conclusion (≤ 300 words); - reads stdin.")],
    artifacts: Annotated[str | None, typer.Option(
        "--artifacts", metavar="PATHS", help="Comma-separated paths of what the task produced.")] = None,
    to: Annotated[str | None, typer.Option(
        "--to", metavar="NAME", help="The contact who sent the task, if several did.")] = None,
    user: User = None, relay: Relay = None, passphrase_file: PassFile = None, as_json: Json = False,
) -> None:
    """Answer a received task with a well-formed result block."""
    from talk.context import open_account, read_text_arg
    from talk.output import warn

    items = [a.strip() for a in artifacts.split(",") if a.strip()] if artifacts else []
    account = open_account(user, relay, passphrase_file)
    sent = account.reply(task, status, read_text_arg(summary), items, to=to)
    if sent.warning:
        warn(sent.warning)
    result({"id": sent.id, "to": sent.to, "task": task, "status": status},
           f"sent the {status} result of {task} to {sent.to}", as_json)


def forward(
    msg_id: Annotated[str, typer.Argument(
        metavar="ID", help="A received message's id as `talk log` shows it (or 6+ of its first "
        "characters).")],
    name: Annotated[str, typer.Argument(metavar="NAME", help="The contact to pass it on to.")],
    user: User = None, relay: Relay = None, passphrase_file: PassFile = None, as_json: Json = False,
) -> None:
    """Pass a received message on; its hop list grows, and past 4 hops peers refuse it."""
    from talk.context import open_account
    from talk.output import warn
    from talk.spool_cli import find_record

    record = find_record(user, msg_id)
    sent = open_account(user, relay, passphrase_file).forward(record, name)
    if sent.warning:
        warn(sent.warning)
    result(sent.report(), f"sent {sent.id} to {sent.to}", as_json)
