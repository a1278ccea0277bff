"""Options every command shares, declared once."""

from __future__ import annotations

from typing import Annotated

import typer

User = Annotated[str | None, typer.Option("--user", "-u", help="Identity to act as (or TALK_USER).")]
Relay = Annotated[
    str | None, typer.Option("--relay", help="Relay URL (or TALK_RELAY; default: saved at init).")
]
PassFile = Annotated[
    str | None,
    typer.Option("--passphrase-file", help="File holding the passphrase (or TALK_PASSPHRASE_FILE)."),
]
Json = Annotated[bool, typer.Option("--json", help="Machine-readable output.")]
