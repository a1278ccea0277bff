"""Which identity, passphrase and relay a command runs with: the `Account` it acts through.

Identity: `-u/--user` or TALK_USER, else the only one in TALK_HOME. Passphrase: the file named
by `--passphrase-file` or TALK_PASSPHRASE_FILE, else, on a terminal, typed at a prompt that does
not echo; never the command line. Relay: `--relay` or TALK_RELAY, else the one saved at
`talk init`.
"""

from __future__ import annotations

import os
import stat
import sys
from functools import partial
from typing import TYPE_CHECKING

from durable.errors import UserError
from durable.files import check_private_dir
from keys import keystore

if TYPE_CHECKING:
    from follower.account import Account

DEFAULT_RELAY = "http://127.0.0.1:8765"


def passphrase_from(path: str | None) -> bytes | None:
    path = path or os.environ.get("TALK_PASSPHRASE_FILE") or None
    if path is None:
        return None
    try:
        mode = os.stat(path).st_mode
        if mode & (stat.S_IRWXG | stat.S_IRWXO):
            print(f"talk: warning: {path} is readable by others; run `chmod 600 {path}`",
                  file=sys.stderr)
    except OSError:
        pass  # read_passphrase_file reports a missing file
    return keystore.read_passphrase_file(path)


def on_terminal() -> bool:
    return sys.stdin.isatty() and sys.stderr.isatty()


def typed_passphrase(prompt: str, twice: bool = False) -> bytes:
    """A passphrase typed on the terminal, not echoed; `twice` for a new one."""
    import getpass

    typed = getpass.getpass(prompt)
    if not typed:
        raise UserError("no passphrase typed; type one, or give --passphrase-file PATH")
    if twice and getpass.getpass("the same again: ") != typed:
        raise UserError("the two passphrases differ; nothing was created, run the command again")
    return typed.encode()


def unlocking_passphrase(record: keystore.IdentityRecord, path: str | None) -> bytes | None:
    """The passphrase that unlocks `record`: from its file, else typed on a terminal when the
    keys are protected (a command off a terminal gets None, and unlocking says what is missing)."""
    given = passphrase_from(path)
    if given is None and record.protected and on_terminal():
        return typed_passphrase(f"passphrase for {record.name}: ")
    return given


def relay_url(flag: str | None, saved: str = "") -> str:
    return flag or os.environ.get("TALK_RELAY") or saved or DEFAULT_RELAY


def identity_record(user: str | None) -> keystore.IdentityRecord:
    """The identity a command runs as; its folders must be the user's own (see durable.files).
    Enough for a command that only reads its files (without the relay client an Account loads)."""
    home = keystore.talk_home()
    if home.is_dir():
        check_private_dir(home, "TALK_HOME", follow=True)
    name = keystore.choose_identity(home, user or os.environ.get("TALK_USER") or None)
    check_private_dir(home / name, "identity folder")
    return keystore.load(home / name)


def open_account(user: str | None, relay: str | None, passphrase_file: str | None) -> Account:
    """The identity a command runs as (`identity_record`). Its passphrase file is read only when
    its private keys are first needed."""
    from follower.account import Account

    record = identity_record(user)
    passphrase = partial(unlocking_passphrase, record, passphrase_file)
    return Account(record, relay_url(relay, record.relay), passphrase)


def read_text_arg(text: str) -> str:
    """`-` reads the message from stdin, less the one line break that ends what `echo` prints."""
    if text != "-":
        return text
    data = sys.stdin.read()
    if not data:
        raise UserError("no message on stdin; pipe the text in, or give it as an argument")
    return data.removesuffix("\n").removesuffix("\r")
