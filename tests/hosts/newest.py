"""Run the host tests against the newest releases the npm registry serves, not the pins.

    python -m tests.hosts.newest [--dir DIR] [-- PYTEST ARGS...]

It asks the registry for the newest version of each package in tests/hosts/package.json,
installs them into DIR (a fresh temporary folder by default, removed afterwards), and runs
`pytest -m hosts tests/hosts` with that node_modules/.bin in place of the pinned one. It prints
each package's pinned and newest version, then one JSON line:
{"pinned": {...}, "newest": {...}, "pytest_exit": N}. The exit status is pytest's, or 2 when
the registry or the install fails. Moving a pin is then a one-line change in package.json,
made once this run is green.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from tests.hosts.npm import HOST_BIN_ENV, HOSTS_DIR, INSTALL_TIMEOUT

REPO = HOSTS_DIR.parent.parent


def pinned() -> dict[str, str]:
    """Every package tests/hosts pins, the optional ones (a newer Node.js for pi) too."""
    manifest = json.loads((HOSTS_DIR / "package.json").read_text())
    return {**manifest.get("dependencies", {}), **manifest.get("optionalDependencies", {})}


def newest(npm: str, package: str) -> str:
    done = subprocess.run([npm, "view", package, "version"], capture_output=True, text=True, timeout=120)
    if done.returncode != 0 or not done.stdout.strip():
        raise RuntimeError(f"npm view {package} version failed: {done.stderr.strip()[-500:]}")
    return done.stdout.strip().splitlines()[-1]


def install(npm: str, folder: Path, versions: dict[str, str]) -> Path:
    manifest = {"name": "talk-test-hosts-newest", "private": True, "dependencies": versions}
    (folder / "package.json").write_text(json.dumps(manifest, indent=2) + "\n")
    done = subprocess.run([npm, "install", "--no-audit", "--no-fund"], cwd=folder, capture_output=True,
                          text=True, timeout=INSTALL_TIMEOUT)
    if done.returncode != 0:
        raise RuntimeError(f"npm install exited {done.returncode}: {(done.stdout + done.stderr)[-2000:]}")
    return folder / "node_modules" / ".bin"


def main(argv: list[str] | None = None) -> int:
    summary = (__doc__ or "").split("\n\n")[0]
    parser = argparse.ArgumentParser(prog="python -m tests.hosts.newest", description=summary)
    parser.add_argument("--dir", type=Path, help="install here and keep it (default: a temporary folder)")
    parser.add_argument("pytest_args", nargs="*", help="passed to pytest after `--`")
    args = parser.parse_args(argv)
    npm = shutil.which("npm")
    if npm is None:
        print("newest: npm is not on PATH; install Node.js and npm", file=sys.stderr)
        return 2
    pins = pinned()
    folder = args.dir or Path(tempfile.mkdtemp(prefix="talk-hosts-newest-"))
    folder.mkdir(parents=True, exist_ok=True)
    try:
        latest = {package: newest(npm, package) for package in pins}
        for package, version in latest.items():
            mark = "" if version == pins[package] else "   <- newer than the pin"
            print(f"{package:32} pinned {pins[package]:12} newest {version}{mark}", flush=True)
        bin_dir = install(npm, folder, latest)
        env = {**os.environ, HOST_BIN_ENV: str(bin_dir), "TALK_REQUIRE_HOSTS": "1"}
        command = [sys.executable, "-m", "pytest", "-m", "hosts", "tests/hosts", *args.pytest_args]
        code = subprocess.run(command, cwd=REPO, env=env).returncode
    except (RuntimeError, subprocess.TimeoutExpired, OSError) as exc:
        print(f"newest: {exc}", file=sys.stderr)
        return 2
    finally:
        if args.dir is None:
            shutil.rmtree(folder, ignore_errors=True)
    print(json.dumps({"pinned": pins, "newest": latest, "pytest_exit": code}))
    return code


if __name__ == "__main__":
    sys.exit(main())
