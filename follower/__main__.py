"""The follower daemon's own entry point: `python -m follower --folder DIR --relay URL`.

`talk follow` starts it in a new session (setsid) with no terminal; it unlocks the identity
from TALK_PASSPHRASE_FILE (a path, never the passphrase itself), takes the liveness lock and
runs until `talk stop` or a signal.
"""

from __future__ import annotations

import argparse
import logging
import logging.handlers
import os
import sys
from pathlib import Path

from follower.state import LOG_FILE, hold_lock


def setup_logging(folder: Path, to_stderr: bool) -> None:
    from durable.files import open_private

    # The handler opens the log by name and would write through a planted link: refuse one first.
    os.close(open_private(folder / LOG_FILE, os.O_WRONLY | os.O_CREAT | os.O_APPEND))
    handler = logging.handlers.RotatingFileHandler(
        folder / LOG_FILE, maxBytes=1024 * 1024, backupCount=3
    )
    handlers: list[logging.Handler] = [handler]
    if to_stderr:
        handlers.append(logging.StreamHandler(sys.stderr))
    logging.basicConfig(level=logging.INFO, handlers=handlers,
                        format="%(asctime)s %(levelname)s %(message)s")
    os.chmod(folder / LOG_FILE, 0o600)


def run(folder: Path, relay: str, foreground: bool = False) -> int:
    from durable.errors import TalkError
    from follower.daemon import Follower
    from keys import keystore

    setup_logging(folder, foreground)
    log = logging.getLogger("talk.follower")
    lock = hold_lock(folder)
    if lock is None:
        log.info("another follower already holds the lock; exiting")
        return 0
    try:
        record = keystore.load(folder)
        path = os.environ.get("TALK_PASSPHRASE_FILE")
        passphrase = keystore.read_passphrase_file(path) if path else None
        identity = keystore.unlock(record, passphrase)
    except TalkError as exc:
        log.error("cannot start: %s", exc)
        return exc.exit_code
    Follower(identity, folder, relay).run()
    return 0


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m follower")
    parser.add_argument("--folder", required=True, type=Path)
    parser.add_argument("--relay", required=True)
    args = parser.parse_args()
    sys.exit(run(args.folder, args.relay))


if __name__ == "__main__":
    main()
