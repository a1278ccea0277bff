"""Drive `opencode serve` over HTTP (real-hosts.md A): start it, find its URL, call its API."""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import subprocess
import threading
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from alarms.hosts.opencode.status import running_pid
from tests.conftest import REPO, TALK, Agent, wait_for
from tests.hosts.fake_model import FakeModel
from tests.hosts.procs import ProcessGroup, kill_tree, wait_for_text


def http_json(method: str, url: str, body: Any = None, timeout: float = 30.0) -> Any:
    """One JSON call with a timeout (an untimed call at startup once hung for 10 minutes)."""
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        raw = resp.read()
    return json.loads(raw) if raw.strip() else None


def serve(
    group: ProcessGroup, bin_dir: Path, project: Path, env: dict[str, str], log_dir: Path,
    timeout: float = 60.0,
) -> str:
    """Start `opencode serve` in project on a free port; return its base URL once it listens.

    stdout goes to log_dir/opencode.out, logs (stderr) to log_dir/opencode.err.
    """
    log_dir.mkdir(parents=True, exist_ok=True)
    out = log_dir / "opencode.out"
    proc = group.start(
        [bin_dir / "opencode", "serve", "--port", "0", "--hostname", "127.0.0.1", "--print-logs",
         "--log-level", "INFO"],
        cwd=project, env=env, stdout=out, stderr=log_dir / "opencode.err",
    )
    match = wait_for_text(out, r"listening on (http://127\.0\.0\.1:\d+)", timeout, proc)
    return match.group(1)


def new_session(url: str, title: str = "test", timeout: float = 30.0) -> str:
    """POST /session with a title (without one, opencode asks the model for a title)."""
    return str(http_json("POST", f"{url}/session", {"title": title}, timeout)["id"])


def text_parts(text: str) -> dict[str, Any]:
    return {"parts": [{"type": "text", "text": text}]}


WARM_S = 60.0  # the first turn of a fresh opencode instance boots it (2-4 s; more on a busy machine)


def alarm_run(agent: Agent, *args: str) -> subprocess.CompletedProcess[str]:
    """`talk door ARGS --json`, the real command."""
    return subprocess.run([TALK, "door", *args, "--json"], capture_output=True,
                          text=True, env=agent.env(), cwd=REPO, timeout=60)


def alarm(agent: Agent, *args: str) -> dict[str, Any]:
    p = alarm_run(agent, *args)
    assert p.returncode == 0, f"talk door {' '.join(args)} exited {p.returncode}: {p.stderr}"
    out: dict[str, Any] = json.loads(p.stdout)
    return out


@dataclass
class OpencodeServer:
    """`opencode serve` on a fixed port, so a restart comes back at the same URL."""

    group: ProcessGroup
    bin_dir: Path
    project: Path
    env: dict[str, str]
    logs: Path
    port: int
    proc: subprocess.Popen[str] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        self.logs.mkdir(parents=True, exist_ok=True)
        out = self.logs / "opencode.out"
        offset = out.stat().st_size if out.exists() else 0
        self.proc = self.group.start(
            [self.bin_dir / "opencode", "serve", "--port", str(self.port), "--hostname", "127.0.0.1",
             "--print-logs", "--log-level", "INFO"],
            cwd=self.project, env=self.env, stdout=out, stderr=self.logs / "opencode.err")
        deadline = time.monotonic() + 60
        while f"listening on {self.url}" not in out.read_text(errors="replace")[offset:]:
            err = (self.logs / "opencode.err").read_text(errors="replace")[-2000:]
            assert self.proc.poll() is None, f"opencode exited: {err}"
            assert time.monotonic() < deadline, "opencode serve did not listen within 60 s"
            time.sleep(0.05)

    def stop(self) -> None:
        assert self.proc is not None
        kill_tree(self.proc.pid)
        self.proc.wait()

    def user_texts(self, sid: str) -> list[str]:
        """Every user message of the session, its text parts joined: what opencode stored."""
        messages = http_json("GET", f"{self.url}/session/{sid}/message", timeout=10)
        return ["\n".join(p.get("text", "") for p in m["parts"] if p["type"] == "text")
                for m in messages if m["info"]["role"] == "user"]


@dataclass
class Rig:
    alice: Agent
    bob: Agent
    model: FakeModel
    opencode: OpencodeServer
    sid: str
    alarm_pids: list[int]

    @property
    def spool_root(self) -> Path:
        return self.bob.home / "bob" / "spool"

    def send(self, text: str) -> None:
        self.alice.ok("send", "bob", text)

    def spooled(self, text: str) -> bool:
        return any(text in p.read_text(errors="replace") for p in self.spool_root.rglob("*.ndjson*"))

    def start_alarm(self) -> int:
        pid = int(alarm(self.bob, "opencode", "--url", self.opencode.url, "--session", self.sid)["pid"])
        self.alarm_pids.append(pid)
        return pid

    def send_killing_the_alarm(self, texts: list[str], kills: int = 4) -> None:
        """Send `texts` with short random gaps while kill -9 hits the alarm at random moments (at
        least `kills` times), restarting it after each kill."""
        done = threading.Event()
        errors: list[BaseException] = []

        def send_all() -> None:
            try:
                for text in texts:
                    self.send(text)
                    time.sleep(random.uniform(0.0, 0.3))
            except BaseException as exc:
                errors.append(exc)
            finally:
                done.set()

        sender = threading.Thread(target=send_all)
        sender.start()
        folder, killed = self.bob.home / "bob", 0
        while not done.is_set() or killed < kills:
            time.sleep(random.uniform(0.05, 0.5))
            pid = running_pid(folder, self.sid)
            if pid and pid > 0:
                kill9(pid)
                killed += 1
                wait_for(lambda: running_pid(folder, self.sid) is None, 10, "the lock to drop")
            self.start_alarm()
        sender.join()
        assert not errors, errors

    def settled(self, timeout: float = 120.0) -> None:
        """Wait until nothing more can reach the model on its own: the session idle, the alarm's
        outbox empty, every batch it posted confirmed, and bob's spool read to the end. A second
        delivery of something would have been posted by then, so `delivered_once` after this is a
        fair check of "once"."""
        from alarms.hosts.opencode.status import session_doors

        def quiet() -> bool:
            status = http_json("GET", f"{self.opencode.url}/session/status", timeout=10)
            busy = status.get(self.sid, {}).get("type") == "busy"
            rows = [r for r in session_doors(self.bob.home / "bob") if r["session"] == self.sid]
            return not busy and all(r["outbox"] == r["waiting"] == r["unsettled"] == 0 for r in rows)

        wait_for(quiet, timeout, "opencode idle, the alarm's outbox empty and the spool read")

    def delivered_once(self, text: str) -> None:
        """The model got `text` as new input once, and opencode stored it in one user message."""
        assert self.model.count(text) == 1, self.model.summary()
        assert sum(t.count(text) for t in self.opencode.user_texts(self.sid)) == 1


def marker(label: str) -> str:
    return f"{label}-{random.randrange(16**8):08x}"


def kill9(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
