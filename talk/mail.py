"""`talk send` and `talk receive`, kept free of typer so the fast lane can run them.

Agents call these two on every turn; everything here imports only what the command needs.
They parse, call the identity's `Account` (follower.account) and print.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from talk.context import open_account, read_text_arg
from talk.output import emit_json, result, warn

if TYPE_CHECKING:
    from follower.account import Account


def send(user: str | None, relay: str | None, passphrase_file: str | None, name: str, text: str,
         as_json: bool, wait: str | None = None, timeout: float = 30.0, task: bool = False,
         mode: str = "one-shot", hops: list[str] | None = None) -> None:
    """`talk send`: what `send_report` did, as a line or as JSON. If waiting for a receipt ends
    badly (Ctrl-C, a timeout, a relay error), the message was sent all the same: its report is
    printed before the error, so a caller knows its id and does not send it again."""
    sent: dict[str, Any] = {}
    try:
        report = send_report(open_account(user, relay, passphrase_file), name, read_text_arg(text),
                             wait=wait, timeout=timeout, task=task, mode=mode, hops=hops, progress=sent,
                             by=_author(name))
    except BaseException:
        if sent:
            result(sent, _human(sent, wait, task), as_json)
        raise
    result(report, _human(report, wait, task), as_json)


def _author(name: str) -> str:
    """Who writes this message, for a group message only (the one kind that carries it): the
    judgement is imported only then, off the path of every other send."""
    if not name.startswith("@"):
        return "agent"
    from talk.authorship import written_by

    return written_by().value


def _human(report: dict[str, Any], wait: str | None, task: bool) -> str:
    if "gm" in report:
        copies = ", ".join(f"{m['name']} ({m['state']})" for m in report["members"])
        return f"sent {report['gm']} to {report['to']}: {copies}"
    human = f"sent {report['id']} to {report['to']}" + (f" ({report['state']})" if wait else "")
    return human + (f"; task {report['task']}" if task else "")


def send_report(account: Account, name: str, text: str, wait: str | None = None, timeout: float = 30.0,
                task: bool = False, mode: str = "one-shot", hops: list[str] | None = None,
                progress: dict[str, Any] | None = None, by: str = "agent") -> dict[str, Any]:
    """`Account.send`, then with `wait` `Account.wait`, as the dict `talk send --json` and
    `talk mcp` answer; `progress` gets it as soon as the message is sent, before any wait.
    A queued message is not waited for: its warning is printed instead. A `name` of "@GROUP"
    sends to each member of the group (`follower.groups.group_mail`); `by` says who wrote it."""
    if name.startswith("@"):
        return _group_report(account, name[1:], text, wait, task, by)
    if wait is not None:
        from follower.send.waiting import check_wanted

        check_wanted(wait)  # before anything is sent
    sent = account.send(name, text, task=task, mode=mode, hops=hops)
    if sent.warning:
        warn(sent.warning)
    report = sent.report()
    if wait is not None and not sent.queued:
        if progress is not None:
            progress.update(report)
        report["state"] = account.wait(sent.id, wait, timeout)
    return report


def _group_report(account: Account, group: str, text: str, wait: str | None, task: bool,
                  by: str) -> dict[str, Any]:
    from durable.errors import UserError

    if wait is not None or task:
        raise UserError("a group message is neither waited for nor a task: drop --wait/--task, and "
                        "follow each member's copy with `talk status ID`")
    sent = account.groups.send(group, text, by)
    for copy in sent.copies:
        if copy.warning:
            warn(f"{copy.name}: {copy.warning}")
    if sent.held:
        warn(sent.held)
    return sent.report()


def receive(user: str | None, relay: str | None, passphrase_file: str | None,
            peers: list[str] | None) -> None:
    report = open_account(user, relay, passphrase_file).receive(emit_json, peers)
    for note in report.notes:
        warn(note)
    # Refused mail is the sender's (or the relay's) fault, not this command's: it is quarantined,
    # everything else was delivered, so the exit status stays 0 and stderr says what was dropped.
    for reason in report.refused:
        warn(f"quarantined: {reason} (see `talk quarantine`)")
