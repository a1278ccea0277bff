"""talk.help_format: every command's and subcommand's --help reads at 80 columns.

Each value is named by what goes there (ID, NAME, SECONDS, or its choices), never by its type
(<str>) nor in braces ({name}); no option name or sentence is cut short to fit.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import typer.main
from typer.testing import CliRunner

from talk.cli import app


def command_paths(command: object, path: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    yield path
    for name, sub in sorted(getattr(command, "commands", {}).items()):
        yield from command_paths(sub, (*path, name))


PATHS = list(command_paths(typer.main.get_command(app)))


def test_the_walk_reaches_the_nested_commands() -> None:
    nested = {("send",), ("held", "accept"), ("door", "stop", "opencode"), ("session", "register")}
    assert nested <= set(PATHS)


@pytest.mark.parametrize("path", PATHS, ids=lambda p: " ".join(p) or "talk")
def test_help_names_every_value_and_fits_80_columns(path: tuple[str, ...]) -> None:
    shown = CliRunner().invoke(app, [*path, "--help"], env={"COLUMNS": "80"}, terminal_width=80)
    assert shown.exit_code == 0, shown.output
    assert shown.output.startswith(f"Usage: talk {' '.join(path)}".rstrip())
    for placeholder in ("<str>", "<int>", "<float>", "<bool>", "<path>", "<list", "{", "…"):
        assert placeholder not in shown.output, (placeholder, shown.output)
    assert all(len(line) <= 80 for line in shown.output.splitlines()), shown.output


def test_choices_are_listed_and_ids_named() -> None:
    def help_of(*path: str) -> str:
        return CliRunner().invoke(app, [*path, "--help"], env={"COLUMNS": "80"}).output

    assert "talk held accept [OPTIONS] ID|all" in help_of("held", "accept")
    assert "talk forward [OPTIONS] ID NAME" in help_of("forward")
    assert "[NAME] [accept|hold|refuse]" in help_of("policy")
    assert "--wait stored|spooled|written|delivered" in help_of("send")
    assert "--host claude|codex|copilot|gemini|opencode|pi|qwen|other" in help_of("session", "register")
    # A command's first sentence is listed whole, however long.
    assert "verify      Check a contact's keys on the relay against the pin, record the\n" in help_of()
