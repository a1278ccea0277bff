"""`talk door HOST` and `talk door stop HOST`: start and stop daemon doors, one pair of commands
per host in `alarms.registry.daemon_hosts`.

Each host's package says what its commands do and which options they take
(`alarms.door.DaemonHost`); this module only turns that into typer commands and prints what they
return. The options every one shares: --user and --json.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import typer

from alarms.door import Done, DoorOption
from talk.help_format import TalkTyper
from talk.options import Json, User
from talk.output import result
from talk.typed_command import host_option, keyword, typed

__all__ = ["door_app"]

door_app = TalkTyper(no_args_is_help=True)
stop_app = TalkTyper(help="Stop a daemon door.", no_args_is_help=True)
door_app.add_typer(stop_app, name="stop")


def _folder(user: str | None) -> Path:
    from talk.context import open_account

    return open_account(user, None, None).folder


def command(name: str, run: Callable[[Path, Mapping[str, Any]], Done | int],
            options: tuple[DoorOption, ...], doc: str) -> Callable[..., None]:
    """A typer command for host `name`'s door: its own options, then --user and --json."""

    def handler(**given: Any) -> None:
        done = run(_folder(given.pop("user", None)), given)
        if isinstance(done, int):  # the door ran in this terminal until it stopped
            raise typer.Exit(done)
        result(done.data, done.said, bool(given.get("as_json")))

    params = [*(host_option(option) for option in options), keyword("user", User, None),
              keyword("as_json", Json, False)]
    return typed(handler, params, doc, f"{name}_door")


def register() -> None:
    """A start and a stop command per daemon door, in the registry's order."""
    from alarms.registry import daemon_hosts

    hosts = daemon_hosts()
    for host in hosts:
        door_app.command(host.NAME)(command(host.NAME, host.start_door, host.START_OPTIONS, host.START_HELP))
        stop_app.command(host.NAME)(command(host.NAME, host.stop_door, host.STOP_OPTIONS, host.STOP_HELP))
    titles = ", ".join(host.TITLE for host in hosts)
    door_app.info.help = f"Daemon doors: bring mail into agent sessions as it arrives ({titles})."


register()
