"""Which identity, passphrase and relay a command runs with: the `Account` it acts through.

Identity: `-u/--user` or TALK_USER, else the only one in TALK_HOME. Passphrase: the file named
by `--passphrase-file` or TALK_PASSPHRASE_FILE, never the command line. Relay: `--relay` or
TALK_RELAY, else the one saved at `talk init`.
"""

from __future__ import annotations

import os
import stat
import sys
from functools import partial

from durable.errors import UserError
from durable.files import check_private_dir
from follower.account import Account
from keys import keystore

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


def relay_url(flag: str | None, saved: str = "") -> str:
    return flag or os.environ.get("TALK_RELAY") or saved or DEFAULT_RELAY


def open_account(user: str | None, relay: str | None, passphrase_file: str | None) -> Account:
    """The identity a command runs as; its folders must be the user's own (see durable.files).
    Its passphrase file is read only when its private keys are first needed."""
    home = keystore.talk_home()
    if home.is_dir():
        check_private_dir(home, "TALK_HOME", follow=True)
    name = keystore.choose_identity(home, user or os.environ.get("TALK_USER") or None)
    check_private_dir(home / name, "identity folder")
    record = keystore.load(home / name)
    return Account(record, relay_url(relay, record.relay), partial(passphrase_from, passphrase_file))


def read_text_arg(text: str) -> str:
    """`-` reads the message from stdin."""
    if text != "-":
        return text
    data = sys.stdin.read()
    if not data:
        raise UserError("no message on stdin; pipe the text in, or give it as an argument")
    return data
