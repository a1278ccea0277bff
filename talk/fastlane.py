"""A fast lane for the plain forms of `talk send`, `talk receive` and `talk show`.

Agents run the first two on every turn, people read a conversation with the third, and building
the typer command tree costs more than the command itself. The fast lane reads argv with the
option table typer's commands are declared from (talk.command_specs) and follows click's own
rules for it: `-ux` and `-u x` give "x", `-u=x` gives "=x", `--user=x` and `--user x` give "x",
an option's value is the next word whatever it looks like, `--` ends the options, `-` and "" are
positionals, and a repeated option's last value wins (`--peer` collects them). Whatever click
would refuse or handle itself (help, unknown options, a missing value, a value given to a flag,
the wrong number of positionals) and every option the table marks as not fast goes to typer,
which then does what it always does. Both routes call the same functions in `talk.mail` and
`talk.show`.

`talk relay` goes down the same lane, options from the environment included, for another reason:
a relay serves for months, and typer would stay in its memory all that time. Settings its
checks refuse (a bad rate, store or proxy list) go to typer too, which says what is wrong.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from functools import partial
from pathlib import Path
from typing import Any

from talk.command_specs import RECEIVE, SEND, SHOW, CommandSpec, OptionSpec

Params = dict[str, Any]


class _Decline(Exception):
    """argv is a form the fast lane leaves to typer."""


# Commands done in a moment, whose process may end without the interpreter's teardown.
BRIEF = frozenset({"send", "receive", "show"})
# Flag values from the environment as click reads them, in their plainest spellings.
_FLAG_WORDS = {"1": True, "true": True, "0": False, "false": False}


def parse(command: CommandSpec, args: list[str], env: Mapping[str, str] | None = None) -> Params | None:
    """click's parameters for `command` given `args` (the words after its name) and `env` (the
    environment variables its options read), with the defaults typer hands to the command;
    None where typer should parse instead."""
    try:
        return _parse(command, args, env or {})
    except _Decline:
        return None


def route(argv: list[str]) -> Callable[[], None] | None:
    """The call for `argv` if it is a plain send/receive/show or relay, else None."""
    if argv and argv[0] == "relay":
        return _relay(argv[1:])
    command = {"send": SEND, "receive": RECEIVE, "show": SHOW}.get(argv[0]) if argv else None
    params = parse(command, argv[1:]) if command is not None else None
    if command is None or params is None:
        return None
    return partial({"send": _send, "receive": _receive, "show": _show}[command.name], params)


def _relay(args: list[str]) -> Callable[[], None] | None:
    from talk.relay_command import FlagError, relay_settings, serve_relay
    from talk.relay_specs import RELAY

    params = parse(RELAY, args, os.environ)
    if params is None:
        return None
    try:
        settings = relay_settings(params)
    except FlagError:
        return None
    return partial(serve_relay, settings)


def _send(p: Params) -> None:
    from talk.mail import send

    send(p["user"], p["relay"], p["passphrase_file"], p["name"], p["text"], p["as_json"])


def _receive(p: Params) -> None:
    from talk.mail import receive

    receive(p["user"], p["relay"], p["passphrase_file"], p["peer"])


def _show(p: Params) -> None:
    from talk.show import show

    show(**p)


def _parse(command: CommandSpec, args: list[str], env: Mapping[str, str]) -> Params:
    found: Params = {}
    positional: list[str] = []
    rest = list(args)
    while rest:
        arg = rest.pop(0)
        if arg == "--":
            positional += rest
            break
        if arg.startswith("-") and len(arg) > 1:
            _option(command, arg, rest, found)
        else:
            positional.append(arg)
    if not len(command.arguments) <= len(positional) <= len(command.arguments) + len(command.optional):
        raise _Decline  # click's "missing argument" or "unexpected extra argument"
    named = command.arguments + command.optional
    given = dict(zip(named, positional, strict=False)) | dict.fromkeys(named[len(positional):])
    # The fast options' defaults, as typer hands them over (an unused `--peer` is None); the
    # others were not given, or the fast lane would have declined.
    defaults: Params = {o.dest: o.default if o.takes_value else False for o in command.options if o.fast}
    return given | defaults | _environment(command, env, found) | found


def _environment(command: CommandSpec, env: Mapping[str, str], found: Params) -> Params:
    """The values of options not given on the command line, from their environment variables."""
    read: Params = {}
    for spec in command.options:
        text = env.get(spec.envvar) if spec.envvar and spec.dest not in found else None
        if not text:  # click takes an empty variable for an unset one
            continue
        if not spec.takes_value:
            if text.lower() not in _FLAG_WORDS:
                raise _Decline
            _store(spec, _FLAG_WORDS[text.lower()], read)
        else:
            _store(spec, text, read)
    return read


def _option(command: CommandSpec, arg: str, rest: list[str], found: Params) -> None:
    """One option word, as click's parser takes it: first as a long option (with any `=value`
    split off), then, unless it starts with `--`, as a cluster of short options."""
    name, eq, explicit = arg.partition("=")
    spec, on = _lookup(command, name, short=False)
    if spec is not None:
        if spec.takes_value:
            _store(spec, explicit if eq else _next(rest), found)
        elif eq:
            raise _Decline  # click: "Option '--json' does not take a value."
        else:
            _store(spec, on, found)
        return
    if arg.startswith("--"):
        raise _Decline  # no such option (--help among them)
    for i, ch in enumerate(arg[1:], start=2):
        spec, on = _lookup(command, "-" + ch, short=True)
        if spec is None:
            raise _Decline
        if spec.takes_value:
            # The rest of the word is the value, "=" and all: `-u=x` means "=x".
            _store(spec, arg[i:] if i < len(arg) else _next(rest), found)
            return
        _store(spec, on, found)


def _lookup(command: CommandSpec, flag: str, short: bool) -> tuple[OptionSpec | None, bool]:
    """The option spelled `flag`, and whether that spelling turns it on (not a `--no-x`)."""
    # click keeps one-letter options ("-u") apart from long ones and never matches one as the other.
    if _is_short(flag) != short:
        return None, False
    for spec in command.options:
        if flag in spec.flags or flag in spec.off:
            return spec, flag in spec.flags
    return None, False


def _is_short(flag: str) -> bool:
    return len(flag) == 2 and flag[1] != "-"


def _next(rest: list[str]) -> str:
    if not rest:
        raise _Decline  # click: "Option '-u' requires an argument."
    return rest.pop(0)


def _store(spec: OptionSpec, value: str | bool, found: Params) -> None:
    if not spec.fast:
        raise _Decline
    typed = _typed(spec, value) if isinstance(value, str) else value
    if spec.multiple:
        found.setdefault(spec.dest, []).append(typed)
    else:
        found[spec.dest] = typed  # click keeps the last of a repeated option


def _typed(spec: OptionSpec, text: str) -> str | int | float | Path:
    """`text` as click converts it for `spec`, where that is what Python's own conversion gives."""
    if spec.kind is str:
        return text
    if spec.kind is Path:
        if not text:
            raise _Decline  # click makes "." of it
        return Path(text)
    whole, point, part = text.partition(".")
    plain = _digits(whole) and (not point or (spec.kind is float and _digits(part)))
    if not plain:
        raise _Decline
    number: int | float = spec.kind(text)
    if (spec.least is not None and number < spec.least) or (spec.most is not None and number > spec.most):
        raise _Decline  # click: "Input should be greater than or equal to 1"
    return number


def _digits(text: str) -> bool:
    return text.isascii() and text.isdigit()
