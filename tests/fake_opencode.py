"""A stand-in for `opencode serve` that records what it is sent: as the user's own server, or,
run as another user of the machine, as an impostor holding the port while opencode is down.

It answers the calls the opencode alarm makes (`alarms.hosts.opencode.api`) just enough for the
alarm to post: the session exists, prompt_async is accepted, the session is idle, the event
stream is missing (the alarm then polls). `foreign` starts it in a process that drops to
another uid, so the kernel records that uid as the owner of the sockets it accepts.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

NOBODY = 65534

# Run as `python -c SERVER PORT`: one JSON line per request on stdout ("ready" first).
SERVER = r'''
import json, sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

class Handler(BaseHTTPRequestHandler):
    def _answer(self):
        body = self.rfile.read(int(self.headers.get("content-length") or 0)).decode(errors="replace")
        print(json.dumps({"method": self.command, "path": self.path, "body": body,
                          "authorization": self.headers.get("authorization")}), flush=True)
        if self.path.endswith("/prompt_async"):
            self.send_response(204); self.end_headers(); return
        if self.path == "/event":
            self.send_response(404); self.send_header("content-length", "0"); self.end_headers(); return
        reply = {"id": "ses_fake"} if self.command == "POST" else ([] if "/message?" in self.path else {})
        data = json.dumps(reply).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = _answer

    def log_message(self, *args):
        pass

server = ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Handler)
print(json.dumps("ready"), flush=True)
server.serve_forever()
'''


@dataclass
class FakeOpencode:
    proc: subprocess.Popen[str]
    port: int
    requests: list[dict[str, str]] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.requests.append(json.loads(line))


def _drop_to(uid: int) -> None:
    os.setgroups([])
    os.setgid(uid)
    os.setuid(uid)


@contextmanager
def fake_opencode(port: int, uid: int | None = None) -> Iterator[FakeOpencode]:
    """The fake server on 127.0.0.1:`port`, run as `uid` (None: as this process's user)."""
    import threading

    # Another user may not reach this interpreter (a venv or pyenv under root's home): the system's.
    python = sys.executable if uid is None else shutil.which("python3", path="/usr/local/bin:/usr/bin:/bin")
    assert python, "no system python3 for a process of another user"
    proc = subprocess.Popen([python, "-I", "-c", SERVER, str(port)], stdout=subprocess.PIPE, text=True,
                            cwd="/", preexec_fn=None if uid is None else (lambda: _drop_to(uid)))
    assert proc.stdout is not None
    reader = None
    try:
        assert json.loads(proc.stdout.readline()) == "ready", "the fake opencode did not start"
        fake = FakeOpencode(proc, port)
        reader = threading.Thread(target=fake._read, daemon=True)
        reader.start()
        yield fake
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        if reader is not None:
            reader.join(timeout=10)
        proc.stdout.close()
