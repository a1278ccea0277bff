"""`talk run codex`'s own decisions: whether a codex can be attached to, where the socket goes, and
the plain start of a codex that cannot (a stand-in program)."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

from alarms.hosts.codex.launch import MAX_SOCKET_PATH, SOCKET, remote_supported, socket_folder
from tests.conftest import TALK, Agent

HELP_0171 = """      --remote <ADDR>
          Connect the TUI to a remote app server endpoint.
          Accepted forms: `ws://host:port`, `wss://host:port`, `unix://`, or `unix://PATH`."""


def test_remote_is_read_off_the_help() -> None:
    assert remote_supported(HELP_0171)
    assert not remote_supported("  -m, --model <MODEL>\n")
    assert not remote_supported("      --remote <ADDR>   ws://host:port only")  # no Unix socket


def test_the_socket_folder_is_private_and_short_enough(tmp_path: Path) -> None:
    made = socket_folder(tmp_path / "bob", {})
    assert made.parent == tmp_path / "bob" / "codex"
    assert stat.S_IMODE(made.stat().st_mode) == 0o700
    assert stat.S_IMODE(made.parent.stat().st_mode) == 0o700
    assert made.stat().st_uid == os.getuid()
    deep = tmp_path / ("x" * 120) / "bob"
    runtime = tmp_path / "rt"
    elsewhere = socket_folder(deep, {"XDG_RUNTIME_DIR": str(runtime)})
    assert elsewhere.parent == runtime and len(os.fsencode(elsewhere / SOCKET)) <= MAX_SOCKET_PATH
    assert stat.S_IMODE(elsewhere.stat().st_mode) == 0o700


def test_a_codex_without_remote_is_started_plainly_with_a_note(bob: Agent, tmp_path: Path) -> None:
    calls = tmp_path / "calls.jsonl"
    codex = tmp_path / "codex"
    codex.write_text(f"#!{sys.executable}\nimport json, sys\n"
                     "if sys.argv[1:] == ['--help']:\n"
                     "    print('Usage: codex [OPTIONS]\\n  -m, --model <MODEL>')\n"
                     f"    sys.exit(0)\nopen({str(calls)!r}, 'a').write(json.dumps(sys.argv[1:]) + '\\n')\n"
                     "sys.exit(7)\n")
    codex.chmod(0o755)
    env = {**bob.env(), "TALK_CODEX_BIN": str(codex)}
    done = subprocess.run([TALK, "run", "codex", "-m", "x", "hello"], env=env, stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 7, done.stderr
    assert [json.loads(line) for line in calls.read_text().splitlines()] == [["-m", "x", "hello"]]
    (note,) = done.stderr.splitlines()
    assert "no --remote" in note and "hooks" in note
    assert not list((bob.home / "bob").glob("codex/run-*"))
