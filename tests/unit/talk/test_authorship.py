"""talk.authorship: a person at a terminal outside every agent host's session; an agent otherwise."""

from __future__ import annotations

import os
import pty
import subprocess
import sys

import pytest

from alarms.registry import agent_host, author_env
from follower.groups.loop_guard import Author
from talk.authorship import author
from tests.conftest import REPO

AGENT_HOST_ENV = author_env()
HOST_VARS = {name for _, name in AGENT_HOST_ENV}


def test_a_terminal_with_no_host_variable_is_a_person() -> None:
    assert author({"TERM": "xterm"}, on_terminal=True) is Author.PERSON


def test_off_a_terminal_it_is_an_agent() -> None:
    assert author({}, on_terminal=False) is Author.AGENT


@pytest.mark.parametrize(("host", "name"), AGENT_HOST_ENV)
def test_each_hosts_variable_makes_it_an_agent_even_on_a_terminal(host: str, name: str) -> None:
    env = {name: "true" if name == "PI_CODING_AGENT" else "1"}
    assert agent_host(env) == host
    assert author(env, on_terminal=True) is Author.AGENT


@pytest.mark.parametrize("value", ["", "0", "false", " "])
def test_a_host_variable_set_empty_or_false_names_no_host(value: str) -> None:
    assert agent_host({"CLAUDECODE": value}) is None


ASK = "from talk.authorship import written_by; print(written_by().value)"


def written_by_in(env: dict[str, str], terminal: bool) -> str:
    """What a real `python` process decides, its stdin and stdout a pseudo-terminal or pipes."""
    env = {**{k: v for k, v in os.environ.items() if k not in HOST_VARS}, "PYTHONPATH": str(REPO), **env}
    if not terminal:
        done = subprocess.run([sys.executable, "-c", ASK], env=env, stdin=subprocess.DEVNULL,
                              capture_output=True, text=True, timeout=60, check=True)
        return done.stdout.strip()
    main, tty = pty.openpty()
    try:
        proc = subprocess.Popen([sys.executable, "-c", ASK], env=env, stdin=tty, stdout=tty, stderr=tty)
        os.close(tty)
        out = b""
        while True:
            try:
                chunk = os.read(main, 1024)
            except OSError:  # the terminal's other side closed: the process is done
                break
            if not chunk:
                break
            out += chunk
        assert proc.wait(timeout=60) == 0
        return out.decode().strip()
    finally:
        os.close(main)


def test_a_real_process_on_a_terminal_is_a_person_and_inside_a_host_an_agent() -> None:
    assert written_by_in({}, terminal=True) == "person"
    assert written_by_in({"CLAUDECODE": "1"}, terminal=True) == "agent"
    assert written_by_in({}, terminal=False) == "agent"
