"""Files received on a real relay, as the e2e tests inspect them: what lands in downloads, what
is left of a parked message and its key, how far a download got, and a follower's memory."""

from __future__ import annotations

import base64
import hashlib
import os
import signal
import threading
from pathlib import Path

from follower.daemon.liveness import running_pid
from follower.files.parked import Parked
from keys.fileref import FileRef
from spool_writer.record import SpoolRecord
from tests.conftest import Agent, wait_for
from tests.peer_forge import spool_records


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


def downloads(agent: Agent, name: str = "bob") -> list[Path]:
    folder = agent.home / name / "downloads"
    return sorted(folder.iterdir()) if folder.is_dir() else []


def traces_of(ref: FileRef, agent: Agent) -> list[Path]:
    """The files under the agent's TALK_HOME (its downloads aside) that hold the file's key, in
    any form talk writes bytes in."""
    forms = (ref.key, base64.b64encode(ref.key), ref.key.hex().encode())
    return [p for p in agent.home.rglob("*") if p.is_file() and not p.is_symlink()
            and "downloads" not in p.parts and any(form in p.read_bytes() for form in forms)]


def no_partial_left(agent: Agent) -> bool:
    parked = Parked(agent.home / "bob")
    return not parked.ids() and (not parked.partial.is_dir() or not list(parked.partial.iterdir()))


def rss_kb(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as f:
            return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))
    except (OSError, StopIteration):
        return 0


class RssSampler(threading.Thread):
    """The largest RSS seen of whichever follower runs for `folder`, sampled until stopped."""

    def __init__(self, folder: Path) -> None:
        super().__init__(daemon=True)
        self.folder, self.peak, self.samples = folder, 0, 0
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.wait(0.02):
            pid = running_pid(self.folder)
            if pid and pid > 0:
                self.peak = max(self.peak, rss_kb(pid))
                self.samples += 1


def progress_chunk(folder: Path, msg_id: str, file_id: str) -> int:
    for message in Parked(folder).waiting():
        if message.id == msg_id:
            saved = message.progress(file_id)
            return saved.chunk if saved else 0
    return 0


def kill_follower(folder: Path) -> None:
    pid = running_pid(folder)
    assert pid and pid > 0
    os.kill(pid, signal.SIGKILL)
    wait_for(lambda: not running_pid(folder), 20, "the follower gone")


def killed_mid_download(bob: Agent, msg_id: str, file_id: str) -> list[SpoolRecord]:
    """Bob's running follower SIGKILLed once its download of `file_id` has a saved point, then
    started again: the spool lines once the message is in and its parked record erased."""
    folder = bob.home / "bob"
    wait_for(lambda: progress_chunk(folder, msg_id, file_id) > 0, 120, "the download under way")
    kill_follower(folder)
    assert not spool_records(bob, "bob")  # not handed on before its file is in
    bob.ok("follow", "--peer", "alice")
    lines = wait_for(lambda: spool_records(bob, "bob"), 300, "the message, its file in")
    wait_for(lambda: no_partial_left(bob), 60, "the parked record and its key erased")
    return lines
