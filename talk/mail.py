"""`talk send` and `talk receive`, kept free of typer so the fast lane can run them.

Agents call these two on every turn; everything here imports only what the command needs.
"""

from __future__ import annotations

from talk.context import open_session, read_text_arg
from talk.output import emit_json, result, warn


def send(user: str | None, relay: str | None, passphrase_file: str | None, name: str, text: str,
         as_json: bool) -> None:
    from follower.outbound import send as send_message

    s = open_session(user, relay, passphrase_file)
    contact = s.contacts.get(name)
    inner = send_message(s.identity(), s.client, contact, read_text_arg(text))
    result({"id": inner.id, "to": contact.name}, f"sent {inner.id} to {contact.name}", as_json)


def receive(user: str | None, relay: str | None, passphrase_file: str | None,
            peers: list[str] | None) -> None:
    from follower.inbound import Inbox
    from follower.seen import SeenIds
    from follower.state import running_pid
    from keys.errors import SecurityError, UserError

    s = open_session(user, relay, passphrase_file)
    pid = running_pid(s.folder)
    if pid:
        raise UserError(
            f"a follower (pid {pid}) is taking {s.record.name}'s mail into the spool; read it with "
            "`talk log`, or stop the follower with `talk stop` to use `talk receive`"
        )
    chosen = [s.contacts.get(p) for p in peers] if peers else None
    inbox = Inbox(s.identity(), s.client, s.contacts, s.invites, SeenIds(s.folder))
    report = inbox.receive(emit_json, chosen)
    for note in report.notes:
        warn(note)
    if report.refused:
        for reason in report.refused[:-1]:
            warn(reason)
        raise SecurityError(report.refused[-1])
