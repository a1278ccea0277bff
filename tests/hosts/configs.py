"""Config files that point each host at the fake model (real-hosts.md A, B, C), and their env."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

FAKE_API_KEY = "dummy"
OPENCODE_MODEL = {"providerID": "fake", "modelID": "fake-model"}


def write_opencode_config(project: Path, model_url: str, extra: dict[str, Any] | None = None) -> Path:
    """<project>/opencode.json: a chat-completions provider "fake" at model_url/v1, as the default,
    and the `extra` settings."""
    config = {
        "$schema": "https://opencode.ai/config.json",
        "provider": {
            "fake": {
                "npm": "@ai-sdk/openai-compatible",
                "name": "Fake",
                "options": {"baseURL": f"{model_url}/v1", "apiKey": FAKE_API_KEY},
                "models": {"fake-model": {"name": "Fake Model"}},
            }
        },
        "model": "fake/fake-model",
        "small_model": "fake/fake-model",
        "autoupdate": False,
        "share": "disabled",
        **(extra or {}),
    }
    project.mkdir(parents=True, exist_ok=True)
    path = project / "opencode.json"
    path.write_text(json.dumps(config, indent=2) + "\n")
    return path


def write_codex_config(codex_home: Path, model_url: str) -> Path:
    """$CODEX_HOME/config.toml: a Responses provider "fake" at model_url/v1, no retries."""
    config = f"""\
model = "fake-model"
model_provider = "fake"

[model_providers.fake]
name = "Fake"
base_url = "{model_url}/v1"
wire_api = "responses"
env_key = "FAKE_API_KEY"
request_max_retries = 0
stream_max_retries = 0
"""
    codex_home.mkdir(parents=True, exist_ok=True)
    path = codex_home / "config.toml"
    path.write_text(config)
    return path


def codex_env(codex_home: Path) -> dict[str, str]:
    """Extra env for host_env(): where Codex finds config.toml, and the provider's key."""
    return {"CODEX_HOME": str(codex_home), "FAKE_API_KEY": FAKE_API_KEY}


def claude_env(model_url: str) -> dict[str, str]:
    """Extra env for host_env(): Claude Code talks to the fake model with a dummy key."""
    return {"ANTHROPIC_BASE_URL": model_url, "ANTHROPIC_API_KEY": FAKE_API_KEY}


# Claude Code's switch for its cross-session messaging: "0" leaves a session without an inbox
# socket (no CLAUDE_CODE_MESSAGING_SOCKET for its hooks and monitors, no session registry record),
# as on versions before 2.1.224 or with messaging turned off.
CLAUDE_NO_INBOX = {"CLAUDE_CODE_HARBOR_KITE": "0"}


def seed_claude_home(home: Path, project: Path, api_key: str = FAKE_API_KEY) -> Path:
    """<home>/.claude.json so interactive claude in project shows no onboarding, trust or key dialog."""
    state = {
        "hasCompletedOnboarding": True,
        "theme": "dark",
        "numStartups": 5,
        "autoUpdates": False,
        "customApiKeyResponses": {"approved": [api_key[-20:]], "rejected": []},
        "projects": {
            str(project.resolve()): {
                "hasTrustDialogAccepted": True,
                "hasCompletedProjectOnboarding": True,
                "allowedTools": [],
            }
        },
    }
    home.mkdir(parents=True, exist_ok=True)
    path = home / ".claude.json"
    path.write_text(json.dumps(state, indent=2) + "\n")
    return path


PI_PROVIDER, PI_MODEL = "fake", "fake-model"


def write_pi_config(agent_dir: Path, model_url: str) -> Path:
    """<agent dir>/models.json: a Chat Completions provider "fake" at model_url/v1 (pi's
    `openai-completions` API), chosen with `--provider fake --model fake-model`."""
    config = {"providers": {PI_PROVIDER: {
        "baseUrl": f"{model_url}/v1", "api": "openai-completions", "apiKey": FAKE_API_KEY,
        "models": [{"id": PI_MODEL, "contextWindow": 200000, "maxTokens": 4096}],
    }}}
    agent_dir.mkdir(parents=True, exist_ok=True)
    path = agent_dir / "models.json"
    path.write_text(json.dumps(config, indent=2) + "\n")
    return path


def pi_env() -> dict[str, str]:
    """Extra env for host_env(): no catalog refresh, version check or telemetry."""
    return {"PI_OFFLINE": "1", "PI_SKIP_VERSION_CHECK": "1", "PI_TELEMETRY": "0"}
