"""The `talk` commands. Each one resolves its context, calls the library, prints the result."""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from alarms.registry import NAMES as HOST_NAMES
from alarms.registry import OTHER as OTHER_HOST
from talk import conversation_cli, relay_specs
from talk.command_specs import FILE, MODE, PEER, TASK, TIMEOUT, WAIT
from talk.doctor import doctor
from talk.door_cli import door_app
from talk.follow_cli import follow, lock, quarantine, status, stop, unlock
from talk.group_cli import group_app
from talk.help_format import TalkTyper
from talk.install_cli import install_app, uninstall_app
from talk.options import Json, PassFile, Relay, User, option
from talk.output import LOUD_NO_PASSPHRASE, emit_json, result, warn
from talk.purge import purge
from talk.run_cli import run_app
from talk.setup_cli import setup
from talk.show_cli import show_command
from talk.spool_cli import gc_command, log_command, session_app

if TYPE_CHECKING:
    from follower.account import Account
    from keys.contacts import Contact
    from keys.identity import Identity

app = TalkTyper(
    name="talk",
    help="End-to-end encrypted mail between coding agents, through a relay that forgets.",
    no_args_is_help=True,
    add_completion=True,  # --install-completion / --show-completion for bash, zsh, fish
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},  # subcommands inherit it
)
invite_app = TalkTyper(help="Invite codes: one-time, expiring first contact.")
app.add_typer(invite_app, name="invite")



def _print_version(asked: bool) -> None:
    if asked:
        from durable.version import version

        typer.echo(f"talk {version()}")
        raise typer.Exit()


@app.callback()
def talk_options(
    version: Annotated[bool, typer.Option("--version", "-V", is_eager=True, callback=_print_version,
                                          help="Print talk's version and exit.")] = False,
) -> None:
    """End-to-end encrypted mail between coding agents, through a relay that forgets."""


def _account(user: str | None, relay: str | None, passphrase_file: str | None) -> Account:
    from talk.context import open_account

    return open_account(user, relay, passphrase_file)


@app.command()
def init(
    name: Annotated[str, typer.Argument(help="Name of the new identity.")],
    relay: Relay = None,
    passphrase_file: PassFile = None,
    no_passphrase: Annotated[
        bool, typer.Option("--no-passphrase", help="Store private keys unencrypted (0600).")
    ] = False,
    as_json: Json = False,
) -> None:
    """Create an identity under TALK_HOME and publish its keys on the relay."""
    import os

    from durable.errors import RelayError, UserError
    from durable.home import IDENTITY_FILE
    from follower.relay.client import RelayClient, check_relay_url
    from keys import keystore
    from keys.identity import Identity
    from talk.context import on_terminal, passphrase_from, relay_url, typed_passphrase

    has_file = bool(passphrase_file or os.environ.get("TALK_PASSPHRASE_FILE"))
    if (has_file and no_passphrase) or not (has_file or no_passphrase or on_terminal()):
        raise UserError(
            "choose one: --passphrase-file PATH (or TALK_PASSPHRASE_FILE) to encrypt the keys, "
            "or --no-passphrase to store them unencrypted"
        )
    url = check_relay_url(relay_url(relay))
    passphrase = passphrase_from(passphrase_file)
    if passphrase is None and not no_passphrase:  # on a terminal, with no file: typed, twice
        passphrase = typed_passphrase(f"a passphrase for {name}'s keys: ", twice=True)
    identity = Identity.generate(name)
    home = keystore.talk_home()
    folder = keystore.create(home, identity, passphrase, url)
    if no_passphrase:
        warn(LOUD_NO_PASSPHRASE.format(name=name, path=folder / IDENTITY_FILE))
    try:
        RelayClient(url).publish(identity.bundle())
    except RelayError as exc:
        raise RelayError(
            f"created {name} ({identity.fingerprint}) but its keys are NOT published: "
            f"{exc.message}. Run `talk publish -u {name}` once the relay is up"
        ) from exc
    _publish_ratchet_keys(url, folder, identity)
    result(
        {"name": name, "fingerprint": identity.fingerprint, "relay": url, "home": str(folder)},
        f"created {name}: fingerprint {identity.fingerprint}\nkeys published on {url}",
        as_json,
    )


def _publish_ratchet_keys(url: str, folder: Path, identity: Identity) -> None:
    """Best effort: the follower publishes them at its start in any case, and a contact whose
    keys are missing is written to without forward secrecy until they are there."""
    import contextlib

    from durable.errors import TalkError
    from follower.relay.client import RelayClient
    from follower.send.ratchet_keys import publish_ratchet_keys
    from follower.send.ratchet_send import ratchet_enabled
    from keys.ratchet.account import RatchetAccount

    if not ratchet_enabled():
        return
    with contextlib.suppress(TalkError, OSError):
        publish_ratchet_keys(RelayClient(url), RatchetAccount(folder, identity), identity, new_fallback=True)


@app.command()
def publish(
    user: User = None, relay: Relay = None, passphrase_file: PassFile = None, as_json: Json = False
) -> None:
    """Publish this identity's keys on the relay again (after a relay move or reset)."""
    account = _account(user, relay, passphrase_file)
    account.publish()
    result({"fingerprint": account.record.fingerprint, "relay": account.relay},
           f"keys of {account.record.name} published on {account.relay}", as_json)


@app.command("id")
def show_id(user: User = None, relay: Relay = None, as_json: Json = False) -> None:
    """Show this identity's card: name, fingerprint, relay and public keys."""
    from keys.encoding import b64e

    account = _account(user, relay, None)
    r = account.record
    card = {"name": r.name, "fingerprint": r.fingerprint, "relay": account.relay,
            "sign_key": b64e(r.sign_key), "box_key": b64e(r.box_key)}
    result(card, f"{r.name}  {r.fingerprint}\nrelay     {account.relay}\n"
                 f"sign key  {card['sign_key']}\nbox key   {card['box_key']}", as_json)


@app.command()
def whoami(user: User = None, as_json: Json = False) -> None:
    """List the identities in TALK_HOME and say which one commands act as without -u."""
    import os

    from durable.errors import TalkError
    from keys import keystore

    home = keystore.talk_home()
    names = keystore.list_identities(home) if home.is_dir() else []
    chosen = user or os.environ.get("TALK_USER") or None
    try:
        default: str | None = keystore.choose_identity(home, chosen) if names or chosen else None
    except TalkError:
        if chosen:
            raise  # a -u or TALK_USER naming no identity here is the user's mistake to hear about
        default = None  # several, and nothing picks one
    rows = []
    for name in names:
        record = keystore.load(home / name)
        rows.append({"name": name, "fingerprint": record.fingerprint, "relay": record.relay,
                     "passphrase": record.protected, "default": name == default})
    if not rows:
        lines = [f"no identity in {home}; create one with `talk init NAME`"]
    else:
        lines = [f"{'*' if r['default'] else ' '} {r['name']}  {r['fingerprint']}  {r['relay']}"
                 + ("" if r["passphrase"] else "  (keys not encrypted)") for r in rows]
        if default is None:
            lines.append("several identities and none chosen: pick one with -u NAME or TALK_USER")
    result({"home": str(home), "default": default, "identities": rows}, "\n".join(lines), as_json)


@app.command()
def add(
    fingerprint: Annotated[str, typer.Argument(help="The peer's 32-hex fingerprint.")],
    name: Annotated[str, typer.Option("--name", help="Local name for this contact.")],
    user: User = None, relay: Relay = None, as_json: Json = False,
) -> None:
    """Pin a peer by fingerprint: fetch its keys and check they hash to it."""
    from keys.identity import parse_fingerprint

    account = _account(user, relay, None)
    contact = account.add(parse_fingerprint(fingerprint), name)
    _print_pinned(account, contact, as_json)


@app.command()
def verify(
    name: Annotated[str, typer.Argument(help="Contact name (or fingerprint).")],
    yes: conversation_cli.Yes = False, user: User = None, relay: Relay = None, as_json: Json = False,
) -> None:
    """Check a contact's keys on the relay against the pin, record the check in trust.log and
    print the safety number; the ratchet card its session rides on (or, before any session, the
    one it published on the relay) is checked against the pin too, and shown with whether mail
    to it has forward secrecy. Accepting a held contact's mail asks on a terminal, else needs
    --yes."""
    from follower.policy import PolicyBook, raised_by_verify

    account = _account(user, relay, None)
    secrecy = _secrecy(account, account.contacts.get(name))
    had_kem = account.contacts.get(name).post_quantum
    contact = account.verify(name)
    book = PolicyBook(account.folder)
    rule = book.rule(contact)
    wanted = raised_by_verify(rule)
    raised = wanted is not None and conversation_cli.agreed(
        f"Keys match. Accept {contact.name}'s mail from now on (policy {rule.policy.value} → "
        f"{wanted.value})?", yes)
    note = ""
    if raised:
        before, rule = book.change(contact, policy=wanted)
        note = (f"{contact.name}'s mail is now {rule.policy.value} (was {before.policy.value}); "
                "logged in trust.log")
    elif wanted is not None:
        note = (f"{contact.name}'s mail is still {rule.policy.value}: run `talk verify {contact.name} --yes` "
                f"(or `talk policy {contact.name} {wanted.value} --yes`) to accept it")
    pq = (f"post-quantum: yes (mail to {contact.name} is sealed with X25519 and ML-KEM-768)"
          if contact.post_quantum else
          f"post-quantum: no (the relay serves no ML-KEM key signed by {contact.name}'s pinned key: "
          "an older talk?)")
    _print_pinned(account, contact, as_json, {"verified_at": contact.verified_at, "policy": rule.policy.value,
                                              "policy_raised": raised, **secrecy[0],
                                              "post_quantum": contact.post_quantum}, f"{secrecy[1]}\n{pq}")
    if contact.post_quantum and not had_kem:
        warn(f"pinned the post-quantum key of {contact.name}, signed by its pinned key")
    if note:
        warn(note)


def _secrecy(account: Account, contact: Contact) -> tuple[dict[str, Any], str]:
    """What `talk verify` says of forward secrecy with `contact`: JSON fields, and a text. The
    card comes from the session if there is one, else from the relay; either must be signed by
    the pinned key.

    Raises:
        PinMismatch: the card is not one the pinned key signed.
    """
    from durable.errors import RelayError
    from follower.send.ratchet_keys import published_card
    from follower.send.ratchet_send import vouched_card
    from keys.encoding import b64e

    card = vouched_card(account.folder, contact)
    if card is not None:
        head = "forward secrecy: yes; ratchet identity keys, signed by the pinned key:"
        source = "session"
    else:
        try:
            card = published_card(account.client, contact)
        except RelayError as exc:
            return ({"forward_secrecy": False, "ratchet_card": None, "ratchet_card_from": None,
                     "ratchet_card_error": str(exc)},
                    f"forward secrecy: no (no ratchet session with {contact.name} yet, and its ratchet "
                    f"keys could not be read from the relay: {exc}; mail to {contact.name} has none until "
                    "they can be)")
        head = (f"forward secrecy: not yet (the next message to {contact.name} starts a session); ratchet "
                "identity keys published on the relay, signed by the pinned key:")
        source = "relay"
    keys = {"curve25519": b64e(card.curve25519), "ed25519": b64e(card.ed25519)}
    return ({"forward_secrecy": source == "session", "ratchet_card": keys, "ratchet_card_from": source,
             "ratchet_card_error": None},
            f"{head}\n  curve25519 {keys['curve25519']}\n  ed25519    {keys['ed25519']}")


def _print_pinned(account: Account, contact: Contact, as_json: bool,
                  more: dict[str, Any] | None = None, after: str = "") -> None:
    from keys.safety import safety_number

    number = safety_number(account.record.fingerprint, contact.fingerprint)
    result(
        {"name": contact.name, "fingerprint": contact.fingerprint, "safety_number": number, **(more or {})},
        f"{contact.name} pinned: {contact.fingerprint}\n"
        f"safety number (read it aloud; {contact.name} must see the same):\n  {number}"
        + (f"\n{after}" if after else ""),
        as_json,
    )


@app.command()
def contacts(user: User = None, as_json: Json = False) -> None:
    """List contacts, their pinned fingerprints, and whether mail to each has forward secrecy and
    is sealed post-quantum (with their ML-KEM-768 key, and when it was pinned)."""
    from follower.send.ratchet_send import forward_secret
    from keys.encoding import iso_from_epoch

    account = _account(user, None, None)
    items = account.contacts.all()
    rows = [{"name": c.name, "fingerprint": c.fingerprint, "source": c.source.value,
             "verified": c.verified_at is not None,
             "forward_secrecy": forward_secret(account.folder, c.fingerprint),
             "post_quantum": c.post_quantum,
             "post_quantum_since": None if c.kem_pinned_at is None else iso_from_epoch(c.kem_pinned_at)}
            for c in items]
    if as_json:
        emit_json(rows)
        return
    if not rows:
        result({}, "no contacts yet: `talk invite`, `talk join CODE` or `talk add FP --name N`", False)
    for row in rows:
        mark = "verified" if row["verified"] else row["source"]
        secrecy = "forward secrecy" if row["forward_secrecy"] else "no forward secrecy"
        pq = "post-quantum: yes" if row["post_quantum"] else "post-quantum: no"
        result({}, f"{row['name']:<20} {row['fingerprint']}  ({mark}; {secrecy}; {pq})", False)


@app.command()
def send(
    name: Annotated[str, typer.Argument(help="Contact name (or fingerprint), or @GROUP for a group.")],
    text: Annotated[str | None, typer.Argument(help="Message text; - reads stdin (optional with --file).",
                                                show_default=False)] = None,
    files: Annotated[list[str] | None, option(FILE)] = None,
    wait: Annotated[str | None, option(WAIT)] = None,
    timeout: Annotated[float, option(TIMEOUT)] = 30.0,
    task: Annotated[bool, option(TASK)] = False,
    mode: Annotated[str, option(MODE)] = "one-shot",
    user: User = None, relay: Relay = None, passphrase_file: PassFile = None, as_json: Json = False,
) -> None:
    """Send one end-to-end encrypted message to a contact, with files if given; `talk outbox` then shows
    how far it got."""
    from talk import mail

    mail.send(user, relay, passphrase_file, name, text, as_json, wait=wait, timeout=timeout, task=task,
              mode=mode, files=files)


@app.command()
def receive(
    peer: Annotated[list[str] | None, option(PEER)] = None,
    user: User = None, relay: Relay = None, passphrase_file: PassFile = None,
) -> None:
    """Print waiting messages as NDJSON, then acknowledge (delete) them on the relay.

    `talk show` lists them afterwards, beside what you sent; no agent's door gets them again.
    """
    from talk import mail

    mail.receive(user, relay, passphrase_file, peer)


@invite_app.callback(invoke_without_command=True)
def invite(
    ctx: typer.Context,
    expires: Annotated[float, typer.Option(
        "--expires", metavar="DAYS", help="Days until the code expires.")] = 7.0,
    user: User = None, relay: Relay = None, passphrase_file: PassFile = None, as_json: Json = False,
) -> None:
    """Create a single-use invite code (default: expires in 7 days)."""
    if ctx.invoked_subcommand is not None:
        return
    from keys.encoding import iso_from_epoch

    code = _account(user, relay, passphrase_file).invite(expires)
    text = code.encode()
    result(
        {"code": text, "expires": iso_from_epoch(code.expires)},
        f"{text}\nsingle use, expires {iso_from_epoch(code.expires)}; the peer runs:\n"
        f"  talk join {text}",
        as_json,
    )


@invite_app.command("list")
def invite_list(user: User = None, as_json: Json = False) -> None:
    """List invite codes and their state (open, used, revoked, expired)."""
    from keys.encoding import iso_from_epoch
    from keys.invites import state_of

    account = _account(user, None, None)
    now = time.time()
    rows = [{"code": r["code"], "state": state_of(r, now).value,
             "expires": iso_from_epoch(r["expires"]), "used_by": r.get("used_by")}
            for r in account.invites.all().values()]
    if as_json:
        emit_json(rows)
        return
    for row in rows:
        result({}, f"{row['state']:<8} {row['expires']}  {row['code']}", False)
    if not rows:
        result({}, "no invites; create one with `talk invite`", False)


@invite_app.command("revoke")
def invite_revoke(
    code: Annotated[str, typer.Argument(help="The invite code to revoke.")],
    user: User = None, relay: Relay = None, passphrase_file: PassFile = None, as_json: Json = False,
) -> None:
    """Revoke an open invite code so nobody can use it."""
    record = _account(user, relay, passphrase_file).revoke_invite(code)
    result({"code": record["code"], "state": "revoked"}, "invite revoked", as_json)


@app.command()
def join(
    code: Annotated[str, typer.Argument(help="The invite code you were given.")],
    name: Annotated[str | None, typer.Option("--name", help="Local name for the inviter.")] = None,
    user: User = None, relay: Relay = None, passphrase_file: PassFile = None, as_json: Json = False,
) -> None:
    """Use an invite code: pin the inviter and send it your contact request."""
    account = _account(user, relay, passphrase_file)
    contact = account.join(code, name)
    _print_pinned(account, contact, as_json)


@app.command("relay")
def run_relay(
    ctx: typer.Context,
    host: Annotated[str, option(relay_specs.HOST)] = "127.0.0.1",
    port: Annotated[int, option(relay_specs.PORT)] = 8765,
    store: Annotated[str | None, option(relay_specs.STORE)] = None,
    db: Annotated[Path | None, option(relay_specs.DB)] = None,
    ttl: Annotated[float, option(relay_specs.TTL)] = 7 * 86400,
    max_blob: Annotated[int | None, option(relay_specs.MAX_BLOB)] = None,
    purge_interval: Annotated[float, option(relay_specs.PURGE_INTERVAL)] = 60.0,
    max_mailbox: Annotated[int | None, option(relay_specs.MAX_MAILBOX)] = None,
    rate_per_client: Annotated[str, option(relay_specs.RATE_PER_CLIENT)] = "50/1:200",
    rate_per_tag: Annotated[str, option(relay_specs.RATE_PER_TAG)] = "20/1:100",
    max_streams: Annotated[int, option(relay_specs.MAX_STREAMS)] = 8,
    rate_publish: Annotated[str, option(relay_specs.RATE_PUBLISH)] = "10/60:200",
    rate_lookup: Annotated[str, option(relay_specs.RATE_LOOKUP)] = "20/1:400",
    rate_owner: Annotated[str, option(relay_specs.RATE_OWNER)] = "100/1:2000",
    rate_stream: Annotated[str, option(relay_specs.RATE_STREAM)] = "2/1:60",
    max_unknown: Annotated[int, option(relay_specs.MAX_UNKNOWN)] = 200,
    max_per_tag: Annotated[int | None, option(relay_specs.MAX_PER_TAG)] = None,
    max_file_bytes: Annotated[int, option(relay_specs.MAX_FILE_BYTES)] = 512 * 1024 * 1024,
    max_mailbox_file_bytes: Annotated[int, option(relay_specs.MAX_MAILBOX_FILE_BYTES)] = 2048 * 1024 * 1024,
    rate_chunks: Annotated[str, option(relay_specs.RATE_CHUNKS)] = "400/1:800",
    behind_proxy: Annotated[bool, option(relay_specs.BEHIND_PROXY)] = False,
    trusted_proxies: Annotated[str, option(relay_specs.TRUSTED_PROXIES)] = "",
    max_connections: Annotated[int, option(relay_specs.MAX_CONNECTIONS)] = 4096,
    max_connections_per_client: Annotated[int, option(relay_specs.MAX_CONNECTIONS_PER_CLIENT)] = 512,
    max_header_bytes: Annotated[int, option(relay_specs.MAX_HEADER_BYTES)] = 64 * 1024,
    max_headers: Annotated[int, option(relay_specs.MAX_HEADERS)] = 100,
    header_timeout: Annotated[float, option(relay_specs.HEADER_TIMEOUT)] = 10.0,
    body_timeout: Annotated[float, option(relay_specs.BODY_TIMEOUT)] = 30.0,
    metrics_port: Annotated[int | None, option(relay_specs.METRICS_PORT)] = None,
) -> None:
    """Run a relay (SQLite file, or Redis for several replicas) until interrupted."""
    # The fast lane starts a plain `talk relay` without typer; this is the route of the forms it
    # leaves to typer (--no-behind-proxy=x, a bad value), and of `talk relay` run from Python.
    from talk.relay_command import FlagError, relay_settings, serve_relay

    try:
        settings = relay_settings(ctx.params)  # the parameters above, as the fast lane names them
    except FlagError as exc:
        raise typer.BadParameter(exc.message, param_hint=exc.flag) from exc
    serve_relay(settings)


@app.command()
def demo() -> None:
    """Run a relay and two identities on this machine, and let them talk."""
    from talk.demo import run_demo

    run_demo()


# The live-delivery commands, after the core ones in `talk --help`.
app.command()(follow)
app.command()(stop)
app.command()(status)
app.command()(unlock)
app.command()(lock)
app.command()(doctor)
app.command()(quarantine)
app.command()(conversation_cli.outbox)
app.command()(conversation_cli.policy)
app.add_typer(conversation_cli.held_app, name="held")
app.command()(conversation_cli.tasks)
app.command()(conversation_cli.reply)
app.command()(conversation_cli.forward)
app.add_typer(session_app, name="session")
app.add_typer(group_app, name="group")
app.command("log")(log_command)
app.command("show")(show_command)
app.command("gc")(gc_command)
app.command()(purge)

# The doors: how mail enters agent sessions, host by host (alarms.registry).
app.add_typer(install_app, name="install")
app.add_typer(uninstall_app, name="uninstall")
app.add_typer(door_app, name="door")
app.add_typer(door_app, name="alarm", hidden=True)  # its name before "door"; scripts may still say it
app.add_typer(run_app, name="run")
app.command()(setup)  # every installed host at once, as `talk install HOST` would


def mcp_command(
    session: Annotated[str | None, typer.Option(
        "--session", metavar="ID", help="Agent session id that gets its own copy of new mail (default: "
        "the session another door registered for the host process, else mcp-<parent pid>).",
    )] = None,
    host: Annotated[str, typer.Option(
        "--host", metavar="|".join((*HOST_NAMES, OTHER_HOST)),
        help="The agent program that starts this server.",
    )] = "other",
    user: User = None, relay: Relay = None, passphrase_file: PassFile = None,
) -> None:
    """Serve talk's tools to an agent over MCP on stdin/stdout (send, peers, inbox, status)."""
    from talk.mcp_server import serve

    serve(user, relay, passphrase_file, session, host)


# The agents' tools over the Model Context Protocol; the SDK is imported only when this runs.
app.command("mcp")(mcp_command)
