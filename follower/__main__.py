"""The follower daemon's own entry point: `python -m follower --folder DIR --relay URL`.

`talk follow` starts it in a new session (setsid) with no terminal; it unlocks the identity
from TALK_PASSPHRASE_FILE (a path, never the passphrase itself), takes the liveness lock and
runs until `talk stop` or a signal.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path

from durable.daemon import setup_logging
from follower.daemon.state import LOG_FILE, hold_lock

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
    Follower(account).run()
    return 0


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m follower")
    parser.add_argument("--folder", required=True, type=Path)
    parser.add_argument("--relay", required=True)
    args = parser.parse_args()
    sys.exit(run(args.folder, args.relay))


if __name__ == "__main__":
    main()
