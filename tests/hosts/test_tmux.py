"""The terminal helper says how a program that never drew its screen ended, at once."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest

from tests.hosts.tmux import Ended, Tmux

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")


def test_a_program_that_exits_before_drawing_is_reported_with_its_status_at_once(
    tmp_path: Path,
) -> None:
    tmux = Tmux(dict(os.environ), "selftest")
    try:
        tmux.start(tmp_path, ["sh", "-c", "exit 3"])
        started = time.monotonic()
        with pytest.raises(Ended) as caught:
            tmux.wait_shown("a prompt", timeout=120)
        assert time.monotonic() - started < 60  # not the timeout: the exit is seen as it happens
        assert "exited with status 3" in str(caught.value) and "the screen:" in str(caught.value)
    finally:
        tmux.kill()


def test_start_shown_starts_once_more_after_a_first_start_died(tmp_path: Path) -> None:
    flag = tmp_path / "started-once"
    script = f"if [ -e {flag} ]; then echo READY; sleep 600; else touch {flag}; exit 1; fi"
    tmux = Tmux(dict(os.environ), "selftest")
    try:
        screen = tmux.start_shown(tmp_path, ["sh", "-c", script], "READY")
        assert "READY" in screen and flag.exists()
    finally:
        tmux.kill()


def test_a_program_in_the_terminal_does_not_see_that_it_runs_under_ci(tmp_path: Path) -> None:
    """Gemini CLI runs headless under CI=true and exits at start; a terminal here is interactive."""
    tmux = Tmux({**os.environ, "CI": "true", "CI_JOB_ID": "7", "GITHUB_ACTIONS": "true"}, "selftest")
    try:
        tmux.start(tmp_path, ["sh", "-c", 'echo "marks:${CI-}${CI_JOB_ID-}${GITHUB_ACTIONS-}."; sleep 600'])
        assert "marks:." in tmux.wait_shown("marks:", timeout=120)
    finally:
        tmux.kill()
