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
    from follower.channeldb import ChannelDB
    from follower.inbound import Inbox
    from talk.context import open_session

    if not unknown:
        raise UserError("say what to purge: `talk purge --unknown` deletes the mail waiting "
                        "under channels you do not read")
    s = open_session(user, relay, passphrase_file)
    inbox = Inbox(s.identity(), s.client, s.contacts, s.invites, ChannelDB(s.folder))
    channels, invites = inbox.routes(None)
    tags = [*channels, *invites, *inbox.receipt_routes()]
    deleted = s.client.purge_unknown(s.identity(), tags)
    result({"deleted": deleted, "kept_channels": len(tags)},
           f"deleted {deleted} message(s) waiting under channels you do not read", as_json)
