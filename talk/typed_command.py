"""Typer commands whose options are known only when talk starts (one command per host): a
handler taking `**given`, dressed with the signature and annotations typer reads its options from.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

__all__ = ["keyword", "typed"]


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
