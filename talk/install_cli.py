"""`talk install HOST` and `talk uninstall HOST`, one pair per host in `alarms.registry`.

Each host's package says what its install and uninstall do and which options of its own they
take (`alarms.door.Host`); this module only turns that into typer commands and prints what they
return. The options every host shares: --user (install only) and --json.
"""

from __future__ import annotations

import inspect
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer

from alarms.door import Done, Request
from talk.help_format import TalkTyper
from talk.options import Json, User
from talk.output import result, warn
from talk.typed_command import keyword, typed

__all__ = ["install_app", "uninstall_app"]

install_app = TalkTyper(help="Install talk's doors into an agent host (hooks, plugin, extension).",
                        no_args_is_help=True)
uninstall_app = TalkTyper(help="Remove what `talk install` put into an agent host.", no_args_is_help=True)


@install_app.callback()
@uninstall_app.callback()
def _private_files() -> None:
    """What an install writes, and what the programs it runs write, is the user's alone."""
    from alarms.host_files import private_umask

    private_umask()


def show(done: Done, as_json: bool) -> None:
    """Print what an install or uninstall returned; exit non-zero when it says the host will not run it."""
    from durable.errors import UserError

    result(done.data, done.said, as_json)
    for line in done.warnings:
        warn(line)
    if done.failure:
        raise UserError(done.failure)


def _option(flag: str, field: str, help_text: str) -> inspect.Parameter:
    kind: Any = (Annotated[Path | None, typer.Option(flag, help=help_text)] if field == "where" else
                 Annotated[str | None, typer.Option(flag, metavar="PROGRAM", help=help_text)])
    return keyword(field, kind, None)


def command(name: str, run: Callable[[Request], Done], doc: str, with_user: bool) -> Callable[..., None]:
    """A typer command for host `name`: its own options, then --user (when `with_user`) and --json."""
    from alarms.registry import host_of

    host = host_of(name)

    def handler(**given: Any) -> None:
        request = Request(python=sys.executable, env=dict(os.environ), user=given.get("user"),
                          where=given.get("where"), program=given.get("program"))
        show(run(request), bool(given.get("as_json")))

    params = [_option(*option) for option in host.OPTIONS]
    if with_user:
        params.append(keyword("user", User, None))
    params.append(keyword("as_json", Json, False))
    return typed(handler, params, doc, f"{name}_command")


def register() -> None:
    """One install and one uninstall command per host, in the registry's order."""
    from alarms.registry import NAMES, host_of

    for name in NAMES:
        host = host_of(name)
        install_app.command(name)(command(name, host.install_doors, host.INSTALL_HELP, True))
        uninstall_app.command(name)(command(name, host.uninstall_doors, host.UNINSTALL_HELP, True))

register()
