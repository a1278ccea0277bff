"""`talk relay` on the fast lane: argv and the environment read as click reads them for typer's
`relay` command (or left to typer), both routes starting the same relay, and a relay process
that holds neither typer nor click nor a metrics library it was not asked for.

Every parse case runs through both parsers, as in test_fastlane.py: where the fast lane takes a
form, its parameters must be click's; the table also says which forms it takes.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import typer
import typer.main
from hypothesis import given, settings
from hypothesis import strategies as st

from talk import relay_command
from talk.cli import app
from talk.fastlane import parse, route
from talk.relay_command import RelaySettings
from talk.relay_specs import RELAY

GROUP: Any = typer.main.get_command(app)
COMMAND: Any = GROUP.commands["relay"]
ENVVARS = [o.envvar for o in RELAY.options if o.envvar] + ["TALK_RELAY_STORE"]

FAST, TYPER = True, False
CASES: list[tuple[list[str], dict[str, str], bool]] = [
    ([], {}, FAST),
    (["--port", "9000", "--db", "x.db"], {}, FAST),
    (["--port=9000", "--host=0.0.0.0"], {}, FAST),
    (["--store", "redis://127.0.0.1:6379/0?prefix=t:"], {}, FAST),
    (["--ttl", "60.5", "--purge-interval", "7"], {}, FAST),
    (["--ttl", "007.50"], {}, FAST),
    (["--max-blob", "1", "--max-mailbox", "5", "--max-per-tag", "3", "--max-unknown", "9"], {}, FAST),
    (["--metrics-port", "65535"], {}, FAST),
    (["--header-timeout", "0.1", "--max-header-bytes", "1024"], {}, FAST),
    (["--max-connections-per-client", "0", "--max-connections", "1"], {}, FAST),
    (["--behind-proxy", "--trusted-proxies", "10.0.0.0/8"], {}, FAST),
    (["--no-behind-proxy"], {}, FAST),
    (["--behind-proxy", "--no-behind-proxy"], {}, FAST),  # the last wins
    (["--rate-per-client", "off", "--rate-owner=5/1:10"], {}, FAST),
    (["--rate-per-client", "bogus"], {}, FAST),  # parsed; refused by relay_settings, below
    (["--port", "1", "--port", "2"], {}, FAST),
    (["--", "x"], {}, TYPER),
    (["extra"], {}, TYPER),
    (["--ttl", "1e3"], {}, TYPER),  # not the plainest spelling: click converts it, or says why not
    (["--ttl", " 5"], {}, TYPER),
    (["--ttl", ".5"], {}, TYPER),
    (["--ttl", "5."], {}, TYPER),
    (["--port", "-1"], {}, TYPER),
    (["--port", "+3"], {}, TYPER),
    (["--port", "5_0"], {}, TYPER),
    (["--port", "5.0"], {}, TYPER),
    (["--port", "\u0665"], {}, TYPER),
    (["--port"], {}, TYPER),
    (["--max-blob", "0"], {}, TYPER),  # under its least: click says so
    (["--metrics-port", "65536"], {}, TYPER),
    (["--header-timeout", "0.05"], {}, TYPER),
    (["--behind-proxy=1"], {}, TYPER),
    (["--db", ""], {}, TYPER),
    (["--help"], {}, TYPER),
    (["-h"], {}, TYPER),
    (["--verbose"], {}, TYPER),
    ([], {"TALK_RELAY_TTL": "120"}, FAST),
    ([], {"TALK_RELAY_TTL": ""}, FAST),  # empty: unset, to click
    (["--ttl", "5"], {"TALK_RELAY_TTL": "9"}, FAST),  # the command line wins
    ([], {"TALK_RELAY_BEHIND_PROXY": "1"}, FAST),
    ([], {"TALK_RELAY_BEHIND_PROXY": "True"}, FAST),
    ([], {"TALK_RELAY_BEHIND_PROXY": "false"}, FAST),
    (["--behind-proxy"], {"TALK_RELAY_BEHIND_PROXY": "0"}, FAST),
    ([], {"TALK_RELAY_BEHIND_PROXY": "yes"}, TYPER),
    ([], {"TALK_RELAY_BEHIND_PROXY": "x"}, TYPER),
    ([], {"TALK_RELAY_METRICS_PORT": "9100", "TALK_RELAY_RATE_PER_TAG": "off"}, FAST),
    ([], {"TALK_RELAY_MAX_BLOB": "0"}, TYPER),
    ([], {"TALK_RELAY_MAX_STREAMS": "2x"}, TYPER),
    (["--max-streams", "2"], {"TALK_RELAY_MAX_STREAMS": "2x"}, FAST),
    ([], {"TALK_RELAY_STORE": "redis://127.0.0.1:6379/1"}, FAST),  # read by relay_settings
]


@pytest.fixture(autouse=True)
def no_relay_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in ENVVARS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("TALK_HOME", str(tmp_path))


def click_params(args: list[str]) -> dict[str, Any] | None:
    """click's parameters for `talk relay ARGS` in this environment, None if it refuses them."""
    try:
        with COMMAND.make_context("relay", list(args)) as ctx:
            return dict(ctx.params)
    except (typer.TyperException, typer.Exit):
        return None


def assert_same_as_click(args: list[str]) -> bool:
    import os

    fast = parse(RELAY, args, os.environ)
    if fast is None:
        return False
    theirs = click_params(args)
    assert theirs is not None, f"click refuses {args!r} but the fast lane took it as {fast!r}"
    assert fast == theirs
    return True


@pytest.mark.parametrize(("args", "env", "fast"), CASES, ids=[f"{a!r} {e!r}" for a, e, _ in CASES])
def test_the_fast_lane_reads_relay_options_as_click_or_declines(
    monkeypatch: pytest.MonkeyPatch, args: list[str], env: dict[str, str], fast: bool
) -> None:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert assert_same_as_click(args) is fast


TOKENS = ["--port", "--port=1", "8765", "--ttl", "1.5", "--ttl=", "0", "-1", "--behind-proxy",
          "--no-behind-proxy", "--behind-proxy=", "--db", "d", "", "--", "-", "--host", "x", "--help",
          "--metrics-port", "70000", "--max-blob", "--store=sqlite:s", "-p"]


@settings(max_examples=300, deadline=None)
@given(args=st.lists(st.sampled_from(TOKENS), max_size=6))
def test_any_mix_of_relay_options_parses_as_click_or_declines(args: list[str]) -> None:
    assert_same_as_click(args)


def _settings_from_both_routes(monkeypatch: pytest.MonkeyPatch, args: list[str]) -> list[RelaySettings]:
    seen: list[RelaySettings] = []
    monkeypatch.setattr(relay_command, "serve_relay", seen.append)
    call = route(["relay", *args])
    assert call is not None
    call()
    COMMAND.main(list(args), prog_name="talk relay", standalone_mode=False)
    return seen


@pytest.mark.parametrize(("args", "env"), [(a, e) for a, e, fast in CASES if fast and "bogus" not in a],
                         ids=[f"{a!r} {e!r}" for a, e, fast in CASES if fast and "bogus" not in a])
def test_both_routes_start_the_same_relay(
    monkeypatch: pytest.MonkeyPatch, args: list[str], env: dict[str, str]
) -> None:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    fast, typed = _settings_from_both_routes(monkeypatch, args)
    assert fast == typed


@pytest.mark.parametrize(("args", "flag"), [
    (["--rate-per-client", "bogus"], "--rate-per-client"),
    (["--rate-stream", "0/1"], "--rate-stream"),
    (["--trusted-proxies", "not-an-address"], "--trusted-proxies"),
    (["--store", "ftp://x"], "--store"),
    (["--store", "sqlite:a", "--db", "b"], "--store"),
    (["--ttl", "0"], "--ttl"),
])
def test_settings_the_relay_refuses_are_left_to_typer_which_names_the_flag(
    args: list[str], flag: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert route(["relay", *args]) is None
    with pytest.raises(typer.BadParameter) as refused:
        COMMAND.main(list(args), prog_name="talk relay", standalone_mode=False)
    assert refused.value.param_hint == flag


LEAN_PROBE = """
import os, sys
import talk.relay_command

def listening(message):  # said once the server is built, just before it serves
    heavy = ("typer", "click", "prometheus_client", "redis", "pydantic")
    print(sorted(name for name in heavy if name in sys.modules), flush=True)
    os._exit(0)

talk.relay_command.warn = listening
from talk.__main__ import main
main(["relay", "--port", "0", *sys.argv[1:]])
"""


def _heavy_modules_of_a_relay(*args: str) -> str:
    probe = subprocess.run([sys.executable, "-c", LEAN_PROBE, *args], capture_output=True, text=True,
                           timeout=60)
    assert probe.returncode == 0, probe.stderr
    return probe.stdout.strip()


def test_a_relay_holds_no_command_line_framework_nor_metrics_library(tmp_path: Path) -> None:
    assert _heavy_modules_of_a_relay("--db", str(tmp_path / "relay.db")) == "[]"


def test_a_relay_asked_for_metrics_holds_the_metrics_library(tmp_path: Path) -> None:
    from tests.conftest import free_port

    held = _heavy_modules_of_a_relay("--db", str(tmp_path / "relay.db"), "--metrics-port", str(free_port()))
    assert held == "['prometheus_client']"
