"""`talk install HOST`, the real command as its own process, as the host tests run it."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from tests.conftest import TALK


def install_codex(args: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """`talk install codex ARGS`."""
    return subprocess.run([TALK, "install", "codex", *args], env=env, cwd=cwd, capture_output=True, text=True,
                          timeout=120)


def install_plugin(target: Path, talk_home: Path) -> Path:
    """`talk install claude --dir target --json`, as a real process."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TALK_")}
    env["TALK_HOME"] = str(talk_home)
    done = subprocess.run(
        [TALK, "install", "claude", "--dir", str(target), "--json"],
        capture_output=True, text=True, env=env, timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"plugin_dir": str(target.resolve())}
    return target.resolve()
