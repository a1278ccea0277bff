"""The pinned host programs (tests/hosts/package.json) and a clean environment to run them in.

`host_bin()` installs them with `npm ci` when node_modules is missing or older than
package-lock.json, under an flock so parallel pytest workers install once. Without npm,
or when the install fails, tests skip — unless TALK_REQUIRE_HOSTS=1, where they fail.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import NoReturn

import pytest

from tests.hosts.procs import ProcessGroup, kill_tree, reap_home

__all__ = ["HOSTS_DIR", "HOST_BIN_ENV", "HOST_NAMES", "ProcessGroup", "host_bin", "host_env", "kill_tree",
           "reap_home"]

HOSTS_DIR = Path(__file__).resolve().parent
HOST_NAMES = ("opencode", "codex", "claude", "pi", "gemini", "qwen", "copilot")
INSTALL_TIMEOUT = 900.0
# Another node_modules/.bin to test instead of the pinned one: `python -m tests.hosts.newest`
# sets it to the newest releases it installed.
HOST_BIN_ENV = "TALK_TEST_HOST_BIN"

_SCRUBBED_PREFIXES = ("CLAUDE_", "ANTHROPIC_", "OPENAI_", "CODEX_", "OPENCODE_", "PI_", "TALK_", "XDG_",
                      "GEMINI_", "GOOGLE_", "COPILOT_")
_SCRUBBED = {"CLAUDECODE", "GH_TOKEN", "GITHUB_TOKEN"}  # Copilot CLI would use them
_LOOPBACK = ("127.0.0.1", "localhost")
# What says "a CI job": some hosts then run headless even in a terminal (Gemini CLI exits at
# start with "No input provided via stdin" under CI=true; ink draws only a final frame). The
# tests drive the hosts as a person's machine runs them.
_CI_MARKERS = {"CI", "CONTINUOUS_INTEGRATION", "GITHUB_ACTIONS", "BUILD_NUMBER", "RUN_ID"}


def _unavailable(reason: str) -> NoReturn:
    if os.environ.get("TALK_REQUIRE_HOSTS") == "1":
        pytest.fail(f"host programs unavailable (TALK_REQUIRE_HOSTS=1): {reason}", pytrace=False)
    pytest.skip(f"host programs unavailable: {reason} (set TALK_REQUIRE_HOSTS=1 to fail instead)")


def _progress(message: str) -> None:
    # sys.__stderr__ bypasses pytest's capture: an install can take a minute.
    stream = sys.__stderr__ or sys.stderr
    print(f"[tests/hosts] {message}", file=stream, flush=True)


def _installed(modules: Path, lock: Path) -> bool:
    stamp = modules / ".package-lock.json"  # npm rewrites this hidden lockfile on every install
    if not stamp.exists() or stamp.stat().st_mtime < lock.stat().st_mtime:
        return False
    return all((modules / ".bin" / name).exists() for name in HOST_NAMES)


# `npm ci` refuses a lock whose optional platform packages the registry did not list (some
# hosts' native add-ons for other systems); `npm install` takes the same lock and leaves them out.
OUT_OF_SYNC = "can only install packages when your package.json and package-lock.json"


def _npm(npm: str, command: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "npm_config_update_notifier": "false"}
    try:
        return subprocess.run([npm, command, "--no-audit", "--no-fund"], cwd=HOSTS_DIR, env=env,
                              capture_output=True, text=True, timeout=INSTALL_TIMEOUT)
    except subprocess.TimeoutExpired:
        _unavailable(f"npm {command} in {HOSTS_DIR.name} took longer than {INSTALL_TIMEOUT:.0f}s")


def _npm_ci(npm: str) -> None:
    _progress(f"npm ci in tests/hosts ({', '.join(HOST_NAMES)}; ~30 s with a warm npm cache) ...")
    started = time.monotonic()
    done = _npm(npm, "ci")
    if done.returncode != 0 and OUT_OF_SYNC in done.stdout + done.stderr:
        lock = HOSTS_DIR / "package-lock.json"
        pinned = lock.read_bytes()
        done = _npm(npm, "install")
        lock.write_bytes(pinned)  # the pins stay as committed; what npm filled in is not kept
        stamp = HOSTS_DIR / "node_modules" / ".package-lock.json"
        if done.returncode == 0 and stamp.exists():
            os.utime(stamp)  # newer than the lock, or the next run would install again
    if done.returncode != 0:
        _unavailable(f"npm install exited {done.returncode}:\n{(done.stdout + done.stderr)[-3000:]}")
    _progress(f"npm install done in {time.monotonic() - started:.1f}s")


def host_bin() -> Path:
    """tests/hosts/node_modules/.bin, with every host program of HOST_NAMES installed in it."""
    other = os.environ.get(HOST_BIN_ENV)
    if other:
        missing = [name for name in HOST_NAMES if not (Path(other) / name).exists()]
        if missing:
            _unavailable(f"{HOST_BIN_ENV}={other} lacks {', '.join(missing)}")
        return Path(other)
    modules, lock = HOSTS_DIR / "node_modules", HOSTS_DIR / "package-lock.json"
    if _installed(modules, lock):
        return modules / ".bin"
    npm = shutil.which("npm")
    if npm is None:
        _unavailable("npm is not on PATH")
    with (HOSTS_DIR / ".npm-ci.lock").open("w") as guard:
        fcntl.flock(guard, fcntl.LOCK_EX)
        if not _installed(modules, lock):
            _npm_ci(npm)
    if not _installed(modules, lock):
        _unavailable(f"npm ci succeeded but {', '.join(HOST_NAMES)} are not all in node_modules/.bin")
    return modules / ".bin"


def _no_proxy(current: str) -> str:
    hosts = [h for h in current.split(",") if h.strip()]
    return ",".join([*hosts, *(h for h in _LOOPBACK if h not in hosts)])


def not_ci(env: dict[str, str]) -> dict[str, str]:
    """env without the variables that mark a CI job."""
    return {k: v for k, v in env.items() if k not in _CI_MARKERS and not k.startswith("CI_")}


def host_env(home: Path, **extra: str) -> dict[str, str]:
    """os.environ without host/talk/XDG settings, HOME=home, auto-updates and telemetry off, + extra.

    XDG_* are dropped too, so hosts keep their config and data under the throwaway HOME.
    """
    env = {
        k: v for k, v in not_ci(dict(os.environ)).items()
        if k not in _SCRUBBED and not k.startswith(_SCRUBBED_PREFIXES)
    }
    no_proxy = _no_proxy(env.get("NO_PROXY") or env.get("no_proxy") or "")
    env.update(
        HOME=str(home),
        DISABLE_AUTOUPDATER="1",
        CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
        OPENCODE_DISABLE_MODELS_FETCH="1",
        OPENCODE_DISABLE_AUTOUPDATE="1",
        OPENCODE_DISABLE_LSP_DOWNLOAD="1",
        NO_PROXY=no_proxy,
        no_proxy=no_proxy,
    )
    env.update(extra)
    return env
