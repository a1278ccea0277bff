"""Drive `opencode serve` over HTTP (real-hosts.md A): start it, find its URL, call its API."""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path
from typing import Any

from tests.hosts.procs import ProcessGroup, wait_for_text


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
