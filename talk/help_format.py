"""`--help` that reads at 80 columns: `TalkTyper`, the typer app every talk command hangs on.

Typer's boxed tables cut long option names short ("--rate-per-clie…") and squeeze the help
into a narrow column at 80 columns; they name values by type (`<str>`) and required arguments
in braces (`{name}`). talk's help uses click's plain layout instead, which wraps rather than
cuts, and names every value by its metavar: ID, NAME, SECONDS, or its choices
(accept|hold|refuse). tests/unit/talk/test_help_format.py walks every command to keep it so.
"""

from __future__ import annotations

from collections.abc import Callable
from enum import Enum
from typing import Any, get_args

import typer
from typer import _click  # typer's own copy of click: its Context and HelpFormatter are these
from typer.core import TyperArgument, TyperCommand, TyperGroup, TyperOption
from typer.models import CommandFunctionType

__all__ = ["ReadableCommand", "ReadableGroup", "TalkTyper"]


def _value_name(param: TyperArgument | TyperOption) -> str:
    """A metavar for a parameter declared without one: its choices, PATH, N, or its name."""
    described = param.type_descriptor
    if described.choices is not None:
        return "|".join(str(c.value) if isinstance(c, Enum) else str(c) for c in described.choices)
    if described.is_path:
        return "PATH"
    kind = get_args(described.annotation)[0] if described.is_list else described.annotation
    if kind in (int, float):
        return "N"
    return (param.name or "value").upper()


def _name_values(params: list[_click.Parameter]) -> None:
    """Give each parameter that takes a value and has no metavar one (see `_value_name`)."""
    for param in params:
        if isinstance(param, TyperOption) and (param.is_flag or param.count):
            continue
        if isinstance(param, TyperArgument | TyperOption) and param.metavar is None:
            param.metavar = _value_name(param)


def _usage_name(argument: TyperArgument) -> str:
    name = argument.metavar or (argument.name or "").upper()
    name = name if argument.required else f"[{name}]"
    return name + ("..." if argument.nargs != 1 else "")


def _usage_pieces(command: _click.Command, ctx: _click.Context) -> list[str]:
    head = [command.options_metavar] if command.options_metavar else []
    return head + [_usage_name(p) for p in command.get_params(ctx) if isinstance(p, TyperArgument)]


def _argument_record(argument: TyperArgument) -> tuple[str, str]:
    label = argument.metavar or (argument.name or "").upper()
    return label, (argument.help or "") + ("  [required]" if argument.required else "")


def _write_parameters(command: _click.Command, ctx: _click.Context, formatter: _click.HelpFormatter) -> None:
    arguments = [_argument_record(p) for p in command.get_params(ctx)
                 if isinstance(p, TyperArgument) and not p.hidden]
    options = [record for p in command.get_params(ctx)
               if not isinstance(p, TyperArgument) and (record := p.get_help_record(ctx)) is not None]
    if arguments:
        with formatter.section("Arguments"):
            formatter.write_dl(arguments)
    if options:
        with formatter.section("Options"):
            formatter.write_dl(options)


class ReadableCommand(TyperCommand):
    """A command whose help names its arguments by metavar, bare (NAME) or optional ([NAME])."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        _name_values(self.params)

    def collect_usage_pieces(self, ctx: _click.Context) -> list[str]:
        return _usage_pieces(self, ctx)

    def format_options(self, ctx: _click.Context, formatter: _click.HelpFormatter) -> None:
        _write_parameters(self, ctx, formatter)


class ReadableGroup(TyperGroup):
    """A group of commands, each listed with its first sentence whole (click cuts it to fit)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        _name_values(self.params)

    def collect_usage_pieces(self, ctx: _click.Context) -> list[str]:
        return [*_usage_pieces(self, ctx), self.subcommand_metavar]

    def format_options(self, ctx: _click.Context, formatter: _click.HelpFormatter) -> None:
        _write_parameters(self, ctx, formatter)
        rows = [(name, _first_sentence(command)) for name in self.list_commands(ctx)
                if (command := self.get_command(ctx, name)) is not None and not command.hidden]
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


def _first_sentence(command: _click.Command) -> str:
    text = " ".join((command.short_help or command.help or "").split("\n\n")[0].split())
    end = text.find(". ")
    return text if end < 0 else text[:end + 1]


class TalkTyper(typer.Typer):
    """typer.Typer with readable help (see the module docstring) for its commands and groups."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("cls", ReadableGroup)
        kwargs.setdefault("rich_markup_mode", None)
        super().__init__(**kwargs)

    def command(self, name: str | None = None, *, cls: type[TyperCommand] | None = None,
                **kwargs: Any) -> Callable[[CommandFunctionType], CommandFunctionType]:
        return super().command(name, cls=cls or ReadableCommand, **kwargs)
