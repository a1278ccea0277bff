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
                             wait=wait, timeout=timeout, task=task, mode=mode, hops=hops, progress=sent)
    except BaseException:
        if sent:
            result(sent, _human(sent, wait, task), as_json)
        raise
    result(report, _human(report, wait, task), as_json)


def _human(report: dict[str, Any], wait: str | None, task: bool) -> str:
    human = f"sent {report['id']} to {report['to']}" + (f" ({report['state']})" if wait else "")
    return human + (f"; task {report['task']}" if task else "")


def send_report(account: Account, name: str, text: str, wait: str | None = None, timeout: float = 30.0,
                task: bool = False, mode: str = "one-shot", hops: list[str] | None = None,
                progress: dict[str, Any] | None = None) -> dict[str, Any]:
    """`Account.send`, then with `wait` `Account.wait`, as the dict `talk send --json` and
    `talk mcp` answer; `progress` gets it as soon as the message is sent, before any wait.
    A queued message is not waited for: its warning is printed instead."""
    if wait is not None:
        from follower.waiting import check_wanted

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


def receive(user: str | None, relay: str | None, passphrase_file: str | None,
            peers: list[str] | None) -> None:
    report = open_account(user, relay, passphrase_file).receive(emit_json, peers)
    for note in report.notes:
        warn(note)
    # Refused mail is the sender's (or the relay's) fault, not this command's: it is quarantined,
    # everything else was delivered, so the exit status stays 0 and stderr says what was dropped.
    for reason in report.refused:
        warn(f"quarantined: {reason} (see `talk quarantine`)")
