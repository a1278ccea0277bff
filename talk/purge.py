"""`talk purge --unknown`: delete the mail a relay holds for this identity under channels it
never reads — what a stranger who knows the fingerprint can leave there.

The relay keeps such mail in a small quota of its own, so it cannot crowd out contacts' mail;
purging empties that quota. The tags this identity reads (its contacts' channels and receipts,
its open invites) are sent along and registered first, so a new contact's first message stays.
"""

from __future__ import annotations

from typing import Annotated

import typer

from talk.options import Json, PassFile, Relay, User
from talk.output import result

Unknown = Annotated[bool, typer.Option(
    "--unknown", help="Delete the waiting mail under channels this identity does not read.")]


def purge(
    unknown: Unknown = False,
    user: User = None, relay: Relay = None, passphrase_file: PassFile = None, as_json: Json = False,
) -> None:
    """Delete junk waiting on the relay: mail under channels you do not read (--unknown)."""
    from durable.errors import UserError
    from talk.context import open_account

    if not unknown:
        raise UserError("say what to purge: `talk purge --unknown` deletes the mail waiting "
                        "under channels you do not read")
    deleted, kept = open_account(user, relay, passphrase_file).purge_unknown()
    result({"deleted": deleted, "kept_channels": kept},
           f"deleted {deleted} message(s) waiting under channels you do not read", as_json)
