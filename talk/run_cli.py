"""`talk run HOST [ARGS…]`: start an agent host with the door that must be opened at launch, one
command per host in `alarms.registry.launch_hosts`.

Each host's package says what its `run` does (`alarms.door.LaunchHost`); this module only turns
that into typer commands. talk's own options (the host's RUN_OPTIONS, then --user) go before the
host's arguments; everything from the first argument talk does not know is the host's, passed
through as given (`--` first passes even `--help` on).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import typer

from alarms.door import DoorOption
from talk.help_format import TalkTyper
from talk.options import User
from talk.typed_command import host_option, keyword, typed

__all__ = ["run_app"]

run_app = TalkTyper(no_args_is_help=True)
PASS_THROUGH = {"allow_extra_args": True, "ignore_unknown_options": True, "allow_interspersed_args": False}


def _folder(user: str | None) -> Path:
    from talk.context import open_account

    return open_account(user, None, None).folder


def command(name: str, run: Any, options: tuple[DoorOption, ...], doc: str) -> Any:
    """A typer command running `run(folder, args, env, given)` in this terminal, `given` holding
    the host's own options; exits with its status."""

    def handler(**given: Any) -> None:
        ctx: typer.Context = given.pop("ctx")
        folder = _folder(given.pop("user", None))
        args: Sequence[str] = list(ctx.args)
        env: Mapping[str, str] = dict(os.environ)
        raise typer.Exit(int(run(folder, args, env, given)))

    params = [keyword("ctx", typer.Context), *(host_option(option) for option in options),
              keyword("user", User, None)]
    return typed(handler, params, doc, f"{name}_run")


def register() -> None:
    """A `talk run NAME` per host whose best door needs a launch flag, in the registry's order."""
    from alarms.registry import launch_hosts

    hosts = launch_hosts()
    for host in hosts:
        run_app.command(host.NAME, context_settings=PASS_THROUGH)(
            command(host.NAME, host.run_session, host.RUN_OPTIONS, host.RUN_HELP))
    titles = ", ".join(host.TITLE for host in hosts) or "none yet"
    run_app.info.help = (f"Start an agent host with talk's door open from its first second ({titles}); "
                         "other arguments go to the host.")


register()
