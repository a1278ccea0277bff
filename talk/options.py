"""Options every command shares, declared once (their spellings live in talk.command_specs)."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from talk.command_specs import JSON, PASSPHRASE_FILE, RELAY, USER, OptionSpec


def option(spec: OptionSpec) -> Any:
    """The typer declaration of `spec`; the parameter it annotates must be named `spec.dest`."""
    # click spells a flag's negative form after a slash: "--behind-proxy/--no-behind-proxy".
    flags = ("/".join(spec.flags + spec.off),) if spec.off else spec.flags
    return typer.Option(*flags, help=spec.help, metavar=spec.metavar, envvar=spec.envvar, min=spec.least,
                        max=spec.most)


User = Annotated[str | None, option(USER)]
Relay = Annotated[str | None, option(RELAY)]
PassFile = Annotated[str | None, option(PASSPHRASE_FILE)]
Json = Annotated[bool, option(JSON)]
