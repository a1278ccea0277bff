"""Typer commands whose options are known only when talk starts (one command per host): a
handler taking `**given`, dressed with the signature and annotations typer reads its options from.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer

__all__ = ["host_option", "keyword", "typed"]

KINDS: dict[str, type] = {"text": str, "required": str, "number": int, "path": Path}


def keyword(name: str, annotation: Any, default: Any = inspect.Parameter.empty) -> inspect.Parameter:
    """One option of the command: `name` is the key it reaches the handler under."""
    return inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=annotation)


def typed(handler: Callable[..., None], params: list[inspect.Parameter], doc: str,
          name: str) -> Callable[..., None]:
    """`handler` as typer sees a command with `params` as its options and `doc` as its help."""
    handler.__signature__ = inspect.Signature(params, return_annotation=None)  # type: ignore[attr-defined]
    handler.__annotations__ = {p.name: p.annotation for p in params} | {"return": None}
    handler.__doc__ = doc
    handler.__name__ = name
    return handler


def host_option(option: tuple[str, str, str, str]) -> inspect.Parameter:
    """One option a host's package declares (`alarms.door.DoorOption`: flag, kind, metavar, help)."""
    flag, kind, metavar, help_text = option
    key = flag.lstrip("-").replace("-", "_")
    if kind == "switch":
        return keyword(key, Annotated[bool, typer.Option(f"{flag}/--no-{flag.lstrip('-')}", help=help_text)],
                       False)
    info = typer.Option(flag, help=help_text, metavar=metavar or None)
    if kind == "required":
        return keyword(key, Annotated[str, info])
    return keyword(key, Annotated[KINDS[kind] | None, info], None)
