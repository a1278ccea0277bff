"""The fast lane takes only plain send/receive forms and leaves the rest to typer."""

from __future__ import annotations

import pytest

from talk.fastlane import _parse, route


@pytest.mark.parametrize(
    "argv",
    [
        ["send", "bob", "hi"],
        ["send", "bob", "-"],
        ["send", "-u", "alice", "bob", "hi", "--json"],
        ["send", "bob", "hi", "--relay=http://127.0.0.1:1", "--passphrase-file", "p"],
        ["receive"],
        ["receive", "--peer", "bob", "--peer", "carol", "-u", "alice"],
    ],
)
def test_plain_forms_take_the_fast_lane(argv: list[str]) -> None:
    assert route(argv) is not None


@pytest.mark.parametrize(
    "argv",
    [
        [],
        ["init", "alice"],
        ["send", "--help"],
        ["send", "bob"],
        ["send", "bob", "hi", "extra"],
        ["send", "bob", "hi", "--verbose"],
        ["send", "bob", "hi", "-u"],
        ["send", "-u", "a", "-u", "b", "bob", "hi"],
        ["send", "bob", "--", "-x"],
        ["receive", "stray"],
        ["receive", "--json"],
        ["receive", "--peer"],
    ],
)
def test_everything_else_goes_to_typer(argv: list[str]) -> None:
    assert route(argv) is None


def test_parse_collects_repeated_peers_and_inline_values() -> None:
    parsed = _parse(["--peer=bob", "--peer", "carol", "-u", "me"], {"--peer", "-u"}, set())
    assert parsed == ({"peer": ["bob", "carol"], "user": ["me"]}, [])
