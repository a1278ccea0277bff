"""Qwen Code in tmux against the fake model, wired to bob by `talk install qwen`: the rig of
tests/hosts/test_qwen.py and the wake bench.

Qwen Code speaks Chat Completions to an OpenAI-compatible provider declared in its settings.json;
the fake model answers it, and calls Qwen's `run_shell_command` for RUN_TOOL. Follow-up suggestions
are off (each would be one more model request), and the TUI runs with `--approval-mode yolo` so
the tool call needs no keypress.
"""

from __future__ import annotations

import json
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from alarms.hosts.qwen import outbox as ob
from alarms.hosts.qwen.status import DoorFiles, running_pid
from tests.conftest import TALK, Agent, wait_for
from tests.hosts.configs import FAKE_API_KEY
from tests.hosts.fake_model import FakeModel
from tests.hosts.tmux import Tmux

WARM_S = 90.0  # a fresh Qwen Code on a loaded machine can take a while to its first request
# How long after the model has a message the door may take to have Qwen's `delivered` for it. On
# a loaded machine Qwen can be busy long enough after taking a long message to lose its answer
# (its own send times out); the door's copy after `RECEIPT_WAIT_S` is then answered `duplicate`,
# and the one after Qwen's dedup window gets the verdict. Receipts are best-effort by design.
SETTLE_S = ob.RECEIPT_WAIT_S + ob.DUPLICATE_WINDOW_S + 20.0
MODEL = "fake-model"


def write_qwen_settings(qwen_home: Path, model_url: str, **more: Any) -> Path:
    """$QWEN_HOME/settings.json: the fake model as the OpenAI-compatible provider, no suggestions."""
    settings = {
        "modelProviders": {"openai": [{"id": MODEL, "name": "Fake", "baseUrl": f"{model_url}/v1",
                                       "envKey": "FAKE_API_KEY"}]},
        "security": {"auth": {"selectedType": "openai"}},
        "model": {"name": MODEL},
        "ui": {"autoModeAcknowledged": True, "enableFollowupSuggestions": False},
        **more,
    }
    qwen_home.mkdir(parents=True, exist_ok=True)
    path = qwen_home / "settings.json"
    path.write_text(json.dumps(settings, indent=2) + "\n")
    return path


def qwen_env(qwen_home: Path) -> dict[str, str]:
    return {"QWEN_HOME": str(qwen_home), "FAKE_API_KEY": FAKE_API_KEY}


def install_qwen(agent: Agent, qwen_home: Path, bin_dir: Path,
                 *args: str) -> subprocess.CompletedProcess[str]:
    """`talk install|uninstall qwen --qwen-home … --qwen-bin … --json` as bob, the real command."""
    verb = args[0] if args and args[0] == "uninstall" else "install"
    rest = args[1:] if verb == "uninstall" else args
    return subprocess.run([TALK, verb, "qwen", "--qwen-home", str(qwen_home), "--qwen-bin",
                           str(bin_dir / "qwen"), "--json", *rest], env=agent.env(), capture_output=True,
                          text=True, timeout=120)


def type_prompt(tmux: Tmux, text: str) -> None:
    """Type `text` and Enter, once the input box is up (keys typed while Qwen starts are lost)."""
    tmux.wait_shown("Type your message", what="Qwen's input box")
    typed = [0.0]

    def shown() -> bool:
        if text in tmux.screen():
            return True
        if time.monotonic() - typed[0] > 5:
            tmux.keys("C-u")
            tmux.keys("-l", text)
            typed[0] = time.monotonic()
        return False

    wait_for(shown, 60, f"{text!r} in Qwen's input box")
    tmux.keys("Enter")


def busy(screen: str) -> bool:
    """A turn is running: Qwen shows how to cancel it."""
    return "esc to cancel" in screen


@dataclass
class QwenRig:
    alice: Agent
    bob: Agent
    model: FakeModel
    tmux: Tmux
    qwen_home: Path
    project: Path
    bin_dir: Path

    @property
    def folder(self) -> Path:
        return self.bob.home / "bob"

    def start(self) -> None:
        self.project.mkdir(parents=True, exist_ok=True)
        self.tmux.start(self.project, [str(self.bin_dir / "qwen"), "--approval-mode", "yolo"])

    def prompt(self, text: str) -> None:
        type_prompt(self.tmux, text)

    def send(self, text: str) -> None:
        self.alice.ok("send", "bob", text)

    def spooled(self, text: str) -> bool:
        root = self.folder / "spool"
        return any(text in p.read_text(errors="replace") for p in root.rglob("*.ndjson*"))

    def door_pid(self) -> int | None:
        pid = running_pid(self.folder)
        return pid if pid and pid > 0 else None

    def door_status(self) -> dict[str, Any]:
        from durable.daemon import load_status

        return load_status(DoorFiles(self.folder).status) or {}

    def settled(self) -> bool:
        """The door holds nothing Qwen has not answered `delivered` for: nothing it could send
        again, so a second copy could only come from Qwen itself, which the counts would show."""
        status = self.door_status()
        delivered = status.get("counts", {}).get("delivered", 0)
        return bool(status) and status.get("waiting") == 0 and delivered > 0

    def door_log(self) -> str:
        path = DoorFiles(self.folder).log
        return path.read_text(errors="replace") if path.exists() else ""

    def qwen_session(self) -> bool:
        return any((self.qwen_home / "sessions").glob("*.json"))

    def wait_ready(self) -> None:
        """Qwen's record is written and the door runs (started by the SessionStart hook)."""
        wait_for(self.qwen_session, WARM_S, "Qwen Code's session record")
        wait_for(self.door_pid, WARM_S, "the Qwen door, started by the SessionStart hook")
        wait_for(lambda: self.door_status().get("sessions"), WARM_S, "the door to register the session")

    def receipt_delivered(self) -> bool:
        rows = self.alice.ok("outbox", "--json").json()
        self.alice.run("receive")
        return bool(rows) and rows[-1]["state"] == "delivered"

    def delivered_once(self, text: str) -> None:
        assert self.model.count(text) == 1, self.model.summary()
