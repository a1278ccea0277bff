"""typer's `send`, `receive`, `show` and `relay` declare exactly the options the tables hold, so
the fast lane, which reads only the tables, knows every option those commands have."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest
import typer.main

from talk.cli import app
from talk.command_specs import RECEIVE, SEND, SHOW, CommandSpec
from talk.relay_specs import RELAY


@pytest.mark.parametrize("spec", [SEND, RECEIVE, SHOW, RELAY], ids=lambda s: s.name)
def test_typer_declares_the_tables_parameters(spec: CommandSpec) -> None:
    group: Any = typer.main.get_command(app)
    params = group.commands[spec.name].params
    arguments = [p.name for p in params if p.param_type_name == "argument"]
    options = {p.name: (tuple(p.opts), tuple(p.secondary_opts), not p.is_flag, p.multiple, p.envvar)
               for p in params if p.param_type_name == "option"}
    assert arguments == [*spec.arguments, *spec.optional]
    assert [p.required for p in params if p.param_type_name == "argument"] == (
        [True] * len(spec.arguments) + [False] * len(spec.optional))
    assert options == {o.dest: (o.flags, o.off, o.takes_value, o.multiple, o.envvar) for o in spec.options}


def test_typer_declares_the_relay_tables_bounds_and_defaults() -> None:
    group: Any = typer.main.get_command(app)
    params = {p.name: p for p in group.commands["relay"].params}
    for spec in RELAY.options:
        assert (params[spec.dest].min, params[spec.dest].max) == (spec.least, spec.most), spec.dest
        assert params[spec.dest].default == (spec.default if spec.takes_value else False), spec.dest


def test_the_fast_lane_imports_neither_typer_nor_click() -> None:
    probe = ("import sys; from talk.fastlane import route; route(['send', '-ux', 'bob', 'hi']); "
             "route(['send', '--help']); print(sorted({'typer', 'click'} & set(sys.modules)))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
