"""stdout carries results (JSON with --json, NDJSON for messages); stderr carries the rest."""

from __future__ import annotations

import json
import sys
from typing import Any

from durable.printable import json_safe, printable


def emit_json(data: Any) -> None:
    sys.stdout.write(json_safe(json.dumps(data, ensure_ascii=False)) + "\n")
    sys.stdout.flush()


def say(human: str) -> None:
    """Lines for a person on stdout. They may carry a peer's or a relay's words: no control,
    reordering or invisible character reaches the terminal raw."""
    sys.stdout.write(printable(human.rstrip("\n"), lines=True) + "\n")
    sys.stdout.flush()


def result(data: dict[str, Any], human: str, as_json: bool) -> None:
    if as_json:
        emit_json(data)
    else:
        say(human)


def warn(message: str) -> None:
    sys.stderr.write(f"talk: {printable(message, lines=True)}\n")
    sys.stderr.flush()


LOUD_NO_PASSPHRASE = (
    "WARNING: the private keys of {name!r} are stored UNENCRYPTED in {path} (mode 0600).\n"
    "         Anyone who can read that file can read your mail and send as you.\n"
    "         Use --passphrase-file for anything but throwaway identities."
)
