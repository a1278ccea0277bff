"""`talk send` and `talk receive`, kept free of typer so the fast lane can run them.

Agents call these two on every turn; everything here imports only what the command needs.
They parse, call the identity's `Account` (follower.account) and print.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from talk.context import open_account, read_text_arg
from talk.output import emit_json, result, warn

if TYPE_CHECKING:
    from collections.abc import Callable

    from follower.account import Account, Sent
    from follower.send.upload import Tick


def send(user: str | None, relay: str | None, passphrase_file: str | None, name: str, text: str | None,
         as_json: bool, wait: str | None = None, timeout: float = 30.0, task: bool = False,
         mode: str = "one-shot", hops: list[str] | None = None, files: list[str] | None = None) -> None:
    """`talk send`: what `send_report` did, as a line or as JSON. If waiting for a receipt ends
    badly (Ctrl-C, a timeout, a relay error), the message was sent all the same: its report is
    printed before the error, so a caller knows its id and does not send it again. With `files`
    the text may be left out; their upload's progress goes to stderr when it is a terminal."""
    from durable.errors import UserError

    if text is None and not files:
        raise UserError("give the message text (- reads stdin), or a --file to send")
    sent: dict[str, Any] = {}
    try:
        report = send_report(open_account(user, relay, passphrase_file), name,
                             "" if text is None else read_text_arg(text), wait=wait, timeout=timeout,
                             task=task, mode=mode, hops=hops, progress=sent, by=_author(name), files=files,
                             tick=_ticker(name))
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
                progress: dict[str, Any] | None = None, by: str = "agent", files: list[str] | None = None,
                tick: Tick | None = None) -> dict[str, Any]:
    """`Account.send` (`Account.send_files` with `files`, or a text too long for one message),
    then with `wait` `Account.wait`, as the dict `talk send --json` and `talk mcp` answer;
    `progress` gets it as soon as the message is sent, before any wait. A queued message is not
    waited for: its warning is printed instead. A `name` of "@GROUP" sends to each member of the
    group (`follower.groups.group_mail`); `by` says who wrote it."""
    if name.startswith("@"):
        if files:
            from durable.errors import UserError

            raise UserError("files go to one contact at a time: send them to each member by name")
        return _group_report(account, name[1:], text, wait, task, by)
    if wait is not None:
        from follower.send.waiting import check_wanted

        check_wanted(wait)  # before anything is sent
    sent = _sent(account, name, text, task, mode, hops, files, tick)
    if sent.warning:
        warn(sent.warning)
    report = sent.report()
    if wait is not None and not sent.queued:
        if progress is not None:
            progress.update(report)
        report["state"] = account.wait(sent.id, wait, timeout)
    return report


def _sent(account: Account, name: str, text: str, task: bool, mode: str, hops: list[str] | None,
          files: list[str] | None, tick: Tick | None) -> Sent:
    # A text of up to a sixth of the long-text line cannot cross it, whatever JSON escapes (six
    # bytes a character at most): the upload machinery is loaded only for a text that might.
    if not files and (len(text) <= LONG_TEXT_SURE or not _long_text(text)):
        return account.send(name, text, task=task, mode=mode, hops=hops)
    if task or hops:
        from durable.errors import UserError

        raise UserError("a task or a relayed message carries text only: send its files in a message "
                        "of their own")
    return account.send_files(name, text, files or [], tick)


LONG_TEXT_SURE = 32 * 1024 // 6  # follower.send.upload.LONG_TEXT // 6 (checked by a test)


def _long_text(text: str) -> bool:
    from follower.send.upload import long_text

    return long_text(text)


def _ticker(name: str, clock: Callable[[], float] | None = None) -> Tick | None:
    """Progress on stderr, on one line rewritten at most every tenth of a second (of `clock`,
    by default the monotonic one), when stderr is a terminal; None (nothing shown) otherwise."""
    import sys
    import time

    if not sys.stderr.isatty():
        return None
    now_s = clock or time.monotonic
    last = [-1.0]

    def tick(sent: int, total: int) -> None:
        now = now_s()
        if sent < total and last[0] >= 0 and now - last[0] < 0.1:
            return
        last[0] = now
        share = 100 * sent // total if total else 100
        end = "\n" if sent >= total else ""
        sys.stderr.write(f"\rsending to {name}: {sent / 1e6:.1f} of {total / 1e6:.1f} MB ({share}%){end}")
        sys.stderr.flush()

    return tick


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
