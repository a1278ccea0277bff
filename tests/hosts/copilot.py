"""GitHub Copilot CLI as the host tests run it: against the fake model through its own custom
provider settings (no GitHub sign-in, nothing leaves the machine), with talk installed by the
real `talk install copilot`."""

from __future__ import annotations

import contextlib
import json
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.conftest import TALK, Agent, wait_for
from tests.hosts import wire
from tests.hosts.fake_model import FakeModel, Request
from tests.hosts.peer_mail import Receipt, bob_layout, handed_states
from tests.hosts.tmux import Tmux

TOOL_DONE = "TOOL_FINISHED"
MODEL = "gpt-4.1"  # a name Copilot knows the limits of; the fake model answers whatever is asked


def copilot_env(model_url: str) -> dict[str, str]:
    """Copilot's documented BYOK settings: an OpenAI Chat Completions provider at the fake model,
    offline (no GitHub auth, telemetry or update checks)."""
    return {"COPILOT_PROVIDER_BASE_URL": f"{model_url}/v1", "COPILOT_PROVIDER_TYPE": "openai",
            "COPILOT_PROVIDER_API_KEY": "dummy", "COPILOT_MODEL": MODEL, "COPILOT_OFFLINE": "true",
            "COPILOT_AUTO_UPDATE": "false"}


def prompt_argv(copilot: Path, prompt: str) -> list[str]:
    """`copilot -p PROMPT`, tools allowed (a prompt-mode run cannot ask)."""
    return [str(copilot), "-p", prompt, "--allow-all-tools"]


def install(env: dict[str, str], cwd: Path, *args: str) -> dict[str, Any]:
    """`talk install copilot --json ARGS` as its own process; its JSON answer."""
    done = subprocess.run([TALK, "install", "copilot", "--json", *args], env=env, cwd=cwd,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    out: dict[str, Any] = json.loads(done.stdout)
    return out


def uninstall(env: dict[str, str], cwd: Path) -> dict[str, Any]:
    done = subprocess.run([TALK, "uninstall", "copilot", "--json"], env=env, cwd=cwd, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    out: dict[str, Any] = json.loads(done.stdout)
    return out


def live_session(bob: Agent) -> dict[str, Any] | None:
    """bob's one live Copilot session, once its hook registered it."""
    live = [s for s in bob.ok("session", "list", "--json").json() if s["host"] == "copilot" and s["alive"]]
    return live[0] if len(live) == 1 else None


def interactive(tmux: Tmux, copilot: Path, project: Path) -> None:
    """Start the interactive Copilot CLI in `tmux`, every tool allowed, and trust the folder for
    this session (the question it asks on a first start there)."""
    tmux.start_shown(project, [str(copilot), "--yolo"], "Do you trust the files",
                     "Copilot's folder trust question")
    tmux.keys("Enter")  # 1. Yes
    tmux.wait_shown("/ commands", what="Copilot's prompt")


@dataclass
class Rig:
    alice: Agent
    bob: Agent
    copilot: Path
    project: Path
    home: Path
    env: dict[str, str]

    def env_for(self, model: FakeModel) -> dict[str, str]:
        return {**self.env, **copilot_env(model.url)}

    def copilot_home(self) -> Path:
        return self.home / ".copilot"


def gated_model(gate: Path) -> FakeModel:
    """RUN_TOOL is answered with a `bash` call that runs until the test opens the gate."""
    return FakeModel(tool_command=f"while [ ! -e {gate} ]; do sleep 0.05; done; echo {TOOL_DONE}")


def in_session_spool(r: Rig, sid: str, needle: str) -> bool:
    path = r.bob.home / "bob" / "spool" / "sessions" / f"{sid}.ndjson"
    return path.exists() and needle in path.read_text()


def door_session(r: Rig) -> str:
    """The id of bob's live Copilot session, once a door (or a hook) registered it."""
    session = wait_for(lambda: live_session(r.bob), 60, "the session's registration by talk's door")
    return str(session["sid"])


def roles(request: Request, needle: str) -> list[str]:
    """The role of each message of a recorded request that carries `needle`."""
    return wire.roles_with(request["path"].split("?")[0], request["body"], needle)


def delivered(r: Rig, msg_id: str) -> bool:
    """bob's hand-over log holds a `delivered` receipt for the message."""
    layout = bob_layout(r.bob)
    return layout.handed.exists() and Receipt.DELIVERED in handed_states(layout, msg_id)


@contextlib.contextmanager
def trusted_rig(pair: tuple[Agent, Agent], host_bin: Path, host_home: Path, tmp_path: Path,
                settings: dict[str, Any] | None = None) -> Iterator[Rig]:
    """bob following alice, `copilot` on PATH, the project trusted in Copilot's own config, and
    `settings` (if any) as Copilot's settings.json; bob's follower stopped on the way out."""
    from tests.hosts.npm import host_env

    alice, bob = pair
    bob.ok("follow", "--peer", "alice")
    project = tmp_path / "project"
    project.mkdir()
    home = host_home / ".copilot"
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.json").write_text(json.dumps({"trustedFolders": [str(project)]}))
    if settings is not None:
        (home / "settings.json").write_text(json.dumps(settings))
    env = host_env(host_home, TALK_HOME=str(bob.home), NO_COLOR="1")
    env["PATH"] = f"{host_bin}:{env.get('PATH', '')}"
    try:
        yield Rig(alice, bob, host_bin / "copilot", project, host_home, env)
    finally:
        bob.run("stop")
