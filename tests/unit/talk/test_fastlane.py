"""The fast lane reads argv exactly as click reads it for typer's commands, or leaves it to typer.

Every case runs through both parsers: the fast lane's `parse` and click's own (typer's copy of
it), through the typer app's command objects. Where the fast lane takes a form, the parameters
must be click's; where it declines, typer parses. The table also says which forms the fast
lane takes, so a parser that declined everything would not pass.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import pytest
import typer
import typer.main
from hypothesis import given, settings
from hypothesis import strategies as st

from talk import mail, show
from talk.cli import app
from talk.command_specs import RECEIVE, SEND, SHOW, CommandSpec
from talk.fastlane import parse, route

SPECS = {"send": SEND, "receive": RECEIVE, "show": SHOW}
RUNS = {"send": mail, "receive": mail, "show": show}  # the module whose function of that name runs it
COMMAND: Any = typer.main.get_command(app)  # typer's own copy of click, or click itself

FAST, TYPER = True, False
CASES: list[tuple[str, list[str], bool]] = [
    ("send", ["bob", "hi"], FAST),
    ("send", ["-u", "x", "bob", "hi"], FAST),
    ("send", ["-ux", "bob", "hi"], FAST),
    ("send", ["-u=x", "bob", "hi"], FAST),  # "=x", as click has it
    ("send", ["--user=x", "bob", "hi"], FAST),
    ("send", ["--user", "x", "bob", "hi"], FAST),
    ("send", ["--user=", "bob", "hi"], FAST),
    ("send", ["-u", "", "bob", "hi"], FAST),
    ("send", ["--user=a=b", "bob", "hi"], FAST),
    ("send", ["-u", "a", "-u", "b", "bob", "hi"], FAST),  # the last wins
    ("send", ["-u", "x", "-u=y", "bob", "hi"], FAST),
    ("send", ["-u", "--json", "bob", "hi"], FAST),  # a value, whatever it looks like
    ("send", ["-u", "--", "bob", "hi"], FAST),
    ("send", ["-u", "-", "bob", "hi"], FAST),
    ("send", ["-u", "--help", "bob", "hi"], FAST),
    ("send", ["-uélan", "bob", "hi"], FAST),
    ("send", ["bob", "-"], FAST),
    ("send", ["-", "hi"], FAST),
    ("send", ["bob", "", "--json"], FAST),
    ("send", ["--", "-u", "hi"], FAST),
    ("send", ["bob", "--", "--json"], FAST),
    ("send", ["--", "bob", "--"], FAST),
    ("send", ["bob", "hi", "--json", "--json"], FAST),
    ("send", ["bob", "--user", "x", "hi"], FAST),
    ("send", ["--relay=http://127.0.0.1:1", "bob", "hi"], FAST),
    ("send", ["--relay", "r", "--passphrase-file", "p", "bob", "hi"], FAST),
    ("send", ["--passphrase-file=p", "bob", "héllo ✓ 你好"], FAST),
    ("send", ["--json=1", "bob", "hi"], TYPER),  # click: --json takes no value
    ("send", ["bob", "hi", "-u"], TYPER),  # click: -u needs a value
    ("send", ["bob", "hi", "--user"], TYPER),
    ("send", ["bob"], FAST),  # the text is optional (with --file); the command says what is missing
    ("send", ["bob", "--file", "a.log"], TYPER),
    ("send", ["bob", "hi", "--file=a.log", "--file", "b.png"], TYPER),
    ("send", ["bob", "hi", "extra"], TYPER),
    ("send", ["--help"], TYPER),
    ("send", ["bob", "hi", "--wait", "stored"], TYPER),
    ("send", ["-u=x", "bob", "hi", "--wait", "stored"], TYPER),
    ("send", ["bob", "hi", "--timeout=5"], TYPER),
    ("send", ["--task", "bob", "hi"], TYPER),
    ("send", ["--mode", "session", "bob", "hi"], TYPER),
    ("send", ["-x", "bob", "hi"], TYPER),
    ("send", ["-ju", "x", "bob", "hi"], TYPER),
    ("send", ["--us", "x", "bob", "hi"], TYPER),  # click has no abbreviations
    ("send", ["---user", "x", "bob", "hi"], TYPER),
    ("send", ["bob", "-5"], TYPER),  # an option to click, not a number
    ("send", ["--=x", "bob", "hi"], TYPER),
    ("receive", [], FAST),
    ("receive", ["--"], FAST),
    ("receive", ["--peer", "a", "--peer=b"], FAST),
    ("receive", ["--peer=", "-u", "me"], FAST),
    ("receive", ["--peer", "--peer"], FAST),
    ("receive", ["-ume", "--relay", "r"], FAST),
    ("receive", ["-u", "a", "-u", "b"], FAST),
    ("receive", ["--json"], TYPER),
    ("receive", ["stray"], TYPER),
    ("receive", ["--peer"], TYPER),
    ("receive", ["--", "x"], TYPER),
    ("receive", ["-h"], TYPER),
    ("show", [], FAST),
    ("show", ["bob"], FAST),
    ("show", ["bob", "-f"], FAST),
    ("show", ["-fu", "me", "bob", "--json"], FAST),
    ("show", ["--peek", "--unread", "--full", "--all", "--follow", "--mark-read", "bob"], FAST),
    ("show", ["--", "-f"], FAST),  # a contact named "-f"
    ("show", [""], FAST),
    ("show", ["bob", "--limit", "5"], FAST),
    ("show", ["--limit=0"], FAST),
    ("show", ["--limit", "007"], FAST),
    ("show", ["--limit", "-1"], TYPER),  # not plain digits: click converts it, and says what is wrong
    ("show", ["--limit", "five"], TYPER),
    ("show", ["--limit", " 5"], TYPER),
    ("show", ["--limit", "\u0665"], TYPER),  # a digit, but not an ASCII one
    ("show", ["--limit"], TYPER),
    ("show", ["bob", "carol"], TYPER),
    ("show", ["-f=1"], TYPER),
    ("show", ["--peek=yes"], TYPER),
    ("show", ["--relay", "r"], TYPER),  # show needs no relay
    ("show", ["-h"], TYPER),
]


def click_params(name: str, args: list[str]) -> dict[str, Any] | None:
    """click's parameters for `talk NAME ARGS`, None if click refuses them (or prints help)."""
    command = COMMAND.commands[name]
    try:
        with command.make_context(name, list(args)) as ctx:
            return {k: _as_typer_passes(v) for k, v in ctx.params.items()}
    except (typer.TyperException, typer.Exit):  # a usage error, or --help shown
        return None


def _as_typer_passes(value: Any) -> Any:
    # A repeatable option is a tuple to click; typer hands the command a list, or None if empty.
    if isinstance(value, tuple | list):
        return list(value) or None
    return value


def assert_same_as_click(name: str, args: list[str]) -> bool:
    """True if the fast lane took `args`; then its parameters must be click's."""
    fast = parse(SPECS[name], args)
    if fast is None:
        return False
    theirs = click_params(name, args)
    assert theirs is not None, f"click refuses {args!r} but the fast lane took it as {fast!r}"
    assert fast == {k: theirs[k] for k in fast}
    # Whatever the fast lane does not fill in is at click's default: it took no option it skips.
    assert {k: v for k, v in theirs.items() if k not in fast} == _click_defaults(SPECS[name])
    return True


def _click_defaults(spec: CommandSpec) -> dict[str, Any]:
    params = click_params(spec.name, ["n"] * len(spec.arguments))
    assert params is not None
    return {o.dest: params[o.dest] for o in spec.options if not o.fast}


@pytest.mark.parametrize(("name", "args", "fast"), CASES, ids=[f"{n} {a!r}" for n, a, _ in CASES])
def test_the_fast_lane_parses_as_click_or_declines(name: str, args: list[str], fast: bool) -> None:
    assert assert_same_as_click(name, args) is fast


TOKENS = ["-u", "-ux", "-u=x", "--user", "--user=y", "--user=", "--json", "--json=1", "--", "-",
          "", "bob", "hi", "é", "--peer", "--peer=p", "--relay", "--passphrase-file=f", "-x",
          "--wait", "--help", "=x", "-5", "-f", "-fu", "--peek", "--limit", "--all", "0", "12", "+3"]


@settings(max_examples=400, deadline=None)
@given(name=st.sampled_from(sorted(SPECS)), args=st.lists(st.sampled_from(TOKENS), max_size=7))
def test_any_mix_of_spellings_parses_as_click_or_declines(name: str, args: list[str]) -> None:
    assert_same_as_click(name, args)


def _calls(monkeypatch: pytest.MonkeyPatch, name: str) -> list[dict[str, Any]]:
    """Record what `talk.mail.NAME` (`talk.show.show`) is called with, every default filled in."""
    real = getattr(RUNS[name], name)
    seen: list[dict[str, Any]] = []

    def record(*args: Any, **kwargs: Any) -> None:
        bound = inspect.signature(real).bind(*args, **kwargs)
        bound.apply_defaults()
        seen.append(dict(bound.arguments))

    monkeypatch.setattr(RUNS[name], name, record)
    return seen


@pytest.mark.parametrize(("name", "args"), [(n, a) for n, a, fast in CASES if fast],
                         ids=[f"{n} {a!r}" for n, a, fast in CASES if fast])
def test_both_routes_make_the_same_call(monkeypatch: pytest.MonkeyPatch, name: str,
                                        args: list[str]) -> None:
    seen = _calls(monkeypatch, name)
    call: Callable[[], None] | None = route([name, *args])
    assert call is not None
    call()
    COMMAND.main([name, *args], prog_name="talk", standalone_mode=False)
    assert len(seen) == 2
    assert seen[0] == seen[1]


@pytest.mark.parametrize("argv", [[], ["init", "alice"], ["sendx", "bob", "hi"], ["--help"]])
def test_other_commands_go_to_typer(argv: list[str]) -> None:
    assert route(argv) is None
