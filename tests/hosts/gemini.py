"""Gemini CLI pointed at the fake model: its settings, its environment, and a non-interactive run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.hosts.configs import FAKE_API_KEY

MODEL = "gemini-2.5-flash"  # named, so Gemini CLI asks no routing question first


def write_gemini_settings(home: Path, **more: Any) -> Path:
    """<home>/.gemini/settings.json: an API key's auth, the fake model's name, nothing that calls
    out (updates, usage statistics, IDE), no banner or tips; `more` merged at the top level."""
    settings: dict[str, Any] = {
        "security": {"auth": {"selectedType": "gemini-api-key"}},
        "model": {"name": MODEL},
        "general": {"enableAutoUpdate": False, "enableAutoUpdateNotification": False},
        "privacy": {"usageStatisticsEnabled": False},
        "ide": {"enabled": False, "hasSeenNudge": True},
        "ui": {"hideBanner": True, "hideTips": True},
        **more,
    }
    path = home / ".gemini" / "settings.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(settings, indent=2) + "\n")
    return path


def gemini_env(model_url: str) -> dict[str, str]:
    """Extra env for host_env(): the Gemini API at the fake model with a dummy key, the project
    trusted for the run (no folder-trust dialog)."""
    return {"GEMINI_API_KEY": FAKE_API_KEY, "GOOGLE_GEMINI_BASE_URL": model_url,
            "GEMINI_CLI_TRUST_WORKSPACE": "true", "NO_COLOR": "1"}


def prompt_argv(gemini: Path, prompt: str) -> list[str]:
    """`gemini -p PROMPT` with tools approved (the fake model's RUN_TOOL calls the shell)."""
    return [str(gemini), "-m", MODEL, "--yolo", "-p", prompt]
