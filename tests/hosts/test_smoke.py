"""Each real host finishes one plain turn against the fake model, and the model saw the prompt."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.hosts import opencode
from tests.hosts.configs import (
    OPENCODE_MODEL,
    claude_env,
    codex_env,
    seed_claude_home,
    write_codex_config,
    write_opencode_config,
)
from tests.hosts.fake_model import FakeModel
from tests.hosts.npm import host_env
from tests.hosts.procs import ProcessGroup

pytestmark = pytest.mark.hosts


@pytest.fixture
def project(tmp_path: Path) -> Path:
    path = tmp_path / "project"
    path.mkdir()
    return path


def test_opencode_serve_runs_a_turn(
    host_bin: Path, fake_model: FakeModel, host_home: Path, host_procs: ProcessGroup, project: Path,
    tmp_path: Path,
) -> None:
    write_opencode_config(project, fake_model.url)
    url = opencode.serve(host_procs, host_bin, project, host_env(host_home), tmp_path / "logs")
    session = opencode.new_session(url, "smoke")
    body = {**opencode.text_parts("hello opencode SMOKE-OC"), "model": OPENCODE_MODEL}
    answer = opencode.http_json("POST", f"{url}/session/{session}/message", body, timeout=90)
    seen = fake_model.wait_for("SMOKE-OC", timeout=5)
    assert seen["path"] == "/v1/chat/completions"
    assert "hello opencode SMOKE-OC" in seen["last_user_text"]
    assert any(f"[req {seen['n']}]" in p.get("text", "") for p in answer["parts"]), answer


def test_codex_exec_runs_a_turn(
    host_bin: Path, fake_model: FakeModel, host_home: Path, host_procs: ProcessGroup, project: Path
) -> None:
    codex_home = host_home / ".codex"
    write_codex_config(codex_home, fake_model.url)
    env = host_env(host_home, **codex_env(codex_home))
    done = host_procs.run(
        [host_bin / "codex", "exec", "--skip-git-repo-check", "hello codex SMOKE-CX"], cwd=project,
        env=env, timeout=90,
    )
    assert done.returncode == 0, done.stderr
    seen = fake_model.wait_for("SMOKE-CX", timeout=5)
    assert seen["path"] == "/v1/responses"
    assert seen["last_user_text"].endswith("hello codex SMOKE-CX")
    assert f"FAKE_OK [req {seen['n']}]" in done.stdout


def test_claude_print_runs_a_turn(
    host_bin: Path, fake_model: FakeModel, host_home: Path, host_procs: ProcessGroup, project: Path
) -> None:
    seed_claude_home(host_home, project)
    env = host_env(host_home, **claude_env(fake_model.url))
    done = host_procs.run(
        [host_bin / "claude", "-p", "hello claude SMOKE-CC"], cwd=project, env=env, timeout=90
    )
    assert done.returncode == 0, done.stderr
    seen = fake_model.wait_for("SMOKE-CC", timeout=5)
    assert seen["path"].startswith("/v1/messages")
    assert "hello claude SMOKE-CC" in seen["last_user_text"]
    assert f"FAKE_OK [req {seen['n']}]" in done.stdout
