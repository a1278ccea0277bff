"""`talk group`: make, change, list and leave group rooms (`talk send @NAME` writes to one)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer

from talk.help_format import TalkTyper
from talk.options import Json, PassFile, Relay, User
from talk.output import result

if TYPE_CHECKING:
    from follower.account import Account
    from follower.groups.group_mail import Changed
    from keys.groups.book import Group

group_app = TalkTyper(help="Group rooms: each message goes to every member, end-to-end encrypted.",
                      no_args_is_help=True)
Name = Annotated[str, typer.Argument(help="The group's name (as `talk group list` shows it).")]
Member = Annotated[str, typer.Argument(help="A contact's name (or fingerprint).")]


def _account(user: str | None, relay: str | None, passphrase_file: str | None) -> Account:
    from talk.context import open_account

    return open_account(user, relay, passphrase_file)


def _name(account: Account, fp: str) -> str:
    if fp == account.record.fingerprint:
        return account.name
    contact = account.contacts.by_fingerprint(fp)
    return contact.name if contact is not None else fp[:8]


def _row(account: Account, group: Group) -> dict[str, Any]:
    return {"name": group.name, "id": group.id, "owner": _name(account, group.owner),
            "state": group.state.value, "version": group.version,
            "members": [{"name": _name(account, m), "fingerprint": m} for m in group.members]}


def _show(account: Account, changed: Changed, verb: str, as_json: bool) -> None:
    """The group as changed; a member that could not be told now is named on stderr (a queued
    message goes later by itself)."""
    from talk.output import warn

    group = changed.group
    row = _row(account, group)
    row["told"] = [{"name": c.name, "id": c.id, "state": c.state} for c in changed.told]
    for copy in changed.told:
        if copy.state != "stored":
            warn(f"{copy.name} is not told yet ({copy.state}{': ' + copy.warning if copy.warning else ''})")
    members = ", ".join(m["name"] for m in row["members"])
    result(row, f"{verb} group {group.name} ({group.state.value}; owner {row['owner']}): {members}", as_json)


@group_app.command("create")
def create(
    name: Name,
    member: Annotated[list[str], typer.Option(
        "--member", "-m", metavar="NAME", help="A contact to put in the group (repeat for each).")],
    user: User = None, relay: Relay = None, passphrase_file: PassFile = None, as_json: Json = False,
) -> None:
    """Make a group you own with contacts as members; each is told."""
    account = _account(user, relay, passphrase_file)
    _show(account, account.groups.create(name, member), "created", as_json)


@group_app.command("add")
def add(name: Name, member: Member, user: User = None, relay: Relay = None,
        passphrase_file: PassFile = None, as_json: Json = False) -> None:
    """Put a contact into a group you own; every member is told."""
    account = _account(user, relay, passphrase_file)
    _show(account, account.groups.add(name, member), "changed", as_json)


@group_app.command("remove")
def remove(name: Name, member: Member, user: User = None, relay: Relay = None,
           passphrase_file: PassFile = None, as_json: Json = False) -> None:
    """Take a member out of a group you own; it gets no later message (the group key changes)."""
    account = _account(user, relay, passphrase_file)
    _show(account, account.groups.remove(name, member), "changed", as_json)


@group_app.command("leave")
def leave(name: Name, user: User = None, relay: Relay = None, passphrase_file: PassFile = None,
          as_json: Json = False) -> None:
    """Leave a group; the others are told. An owner leaving closes it for everyone."""
    account = _account(user, relay, passphrase_file)
    _show(account, account.groups.leave(name), "left", as_json)


@group_app.command("resume")
def resume(
    name: Name,
    member: Annotated[str | None, typer.Option(
        "--member", "-m", metavar="NAME", help="Resume only this member (default: each held one).")] = None,
    user: User = None, relay: Relay = None, passphrase_file: PassFile = None, as_json: Json = False,
) -> None:
    """Lift the loop guard's hold on a group's held members (or one), and release the mail it
    kept aside from them into the spool. Only a person at a terminal can: a member is held
    because its agent kept writing with no person in between."""
    _person_only(f"resumes a held group; run `talk group resume {name}`")
    account = _account(user, relay, passphrase_file)
    resumed = account.groups.resume(name, member)
    held = resumed.released
    failed = account.release(held) if held else 0
    later = "; the senders will learn it on their resend" if failed else ""
    who = sorted(_name(account, fp) for fp in resumed.members)
    lifted = f"resumed {', '.join(who)} in group {resumed.group.name}" if who else \
        f"nobody is held in group {resumed.group.name}"
    result({"name": resumed.group.name, "id": resumed.group.id, "resumed": who, "released": held},
           f"{lifted}: {len(held)} kept message{'s' if len(held) != 1 else ''} released "
           f"into the spool{later}", as_json)


@group_app.command("cap")
def cap(
    value: Annotated[str | None, typer.Argument(
        metavar="N|off", help="Agent messages in a row before a member is held (1-10000), or off.")] = None,
    user: User = None, as_json: Json = False,
) -> None:
    """Show or set the loop guard's cap for this identity; only a person at a terminal sets it."""
    from follower.groups.loop_guard import LoopGuard, parse_cap

    guard = LoopGuard(_account(user, None, None).folder)
    if value is not None:
        parsed = parse_cap(value, "the cap")
        _person_only(f"sets the loop cap; run `talk group cap {value}`")
        guard.set_cap(parsed)
    now = guard.cap()
    shown = "off" if now is None else f"a member is held after {now} agent messages in a row from it"
    result({"cap": now}, f"loop guard: {shown}", as_json)


def _person_only(what: str) -> None:
    """Refuse a command an agent must not run on its own behalf: it lifts the brake on agents.

    Raises:
        UserError: this command runs inside an agent's session or off a terminal.
    """
    from durable.errors import UserError
    from follower.groups.loop_guard import Author
    from talk.authorship import written_by

    if written_by() is not Author.PERSON:
        raise UserError(f"only a person at a terminal {what} in your own terminal, outside any "
                        "agent's session")


@group_app.command("list")
def list_groups(user: User = None, as_json: Json = False) -> None:
    """The groups you are in or were in: members, owner, state."""
    account = _account(user, None, None)
    rows = [_row(account, g) for g in account.groups.book.all().values()]
    lines = [f"{r['name']:<20} {r['state']:<8} owner {r['owner']}: "
             + ", ".join(m["name"] for m in r["members"]) for r in rows]
    result({"groups": rows}, "\n".join(lines) or "no groups yet; make one with `talk group create`", as_json)
