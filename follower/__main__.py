"""The follower daemon's own entry point: `python -m follower --folder DIR --relay URL`.

`talk follow` starts it in a new session (setsid) with no terminal; it unlocks the identity
from TALK_PASSPHRASE_FILE (a path, never the passphrase itself), takes the liveness lock and
runs until `talk stop` or a signal. For a protected identity it also listens as a key agent
(follower.daemon.keyagent), holding nothing until `talk unlock`.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from durable.daemon import setup_logging
from follower.daemon.keyagent import KeyAgent
from follower.daemon.state import LOG_FILE, hold_lock

if TYPE_CHECKING:
    from keys.keystore import IdentityRecord

__all__ = ["run"]


def run(folder: Path, relay: str, foreground: bool = False) -> int:
    from durable.errors import TalkError
    from follower.account import Account
    from follower.daemon.daemon import Follower
    from keys import keystore

    setup_logging(folder / LOG_FILE, foreground)
    log = logging.getLogger("talk.follower")
    lock = hold_lock(folder)
    if lock is None:
        log.info("another follower already holds the lock; exiting")
        return 0
    try:
        path = os.environ.get("TALK_PASSPHRASE_FILE")
        passphrase = keystore.read_passphrase_file(path) if path else None
        account = Account(keystore.load(folder), relay, lambda: passphrase, sessions=True)
        account.identity()  # unlocked here, so a wrong passphrase is logged as such
    except TalkError as exc:
        log.error("cannot start: %s", exc)
        return exc.exit_code
    agent = KeyAgent(folder, lambda key: _opens(account.record, key), log.info)
    if account.record.protected:
        agent.start()  # before the follower's threads: it sets the umask for a moment
    try:
        Follower(account).run()
    finally:
        agent.close()
    return 0


def _opens(record: IdentityRecord, key: bytes) -> bool:
    from durable.errors import UserError
    from keys import keystore

    try:
        keystore.unlock_with_key(record, key)
    except UserError:
        return False
    return True


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m follower")
    parser.add_argument("--folder", required=True, type=Path)
    parser.add_argument("--relay", required=True)
    args = parser.parse_args()
    sys.exit(run(args.folder, args.relay))


if __name__ == "__main__":
    main()
