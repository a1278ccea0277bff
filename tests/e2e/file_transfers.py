"""File transfers on a real relay, as the e2e tests drive and inspect them: a sender sampled or
killed mid-upload, the transfer records it left, what the relay holds."""

from __future__ import annotations

import contextlib
import hashlib
import json
import random
import signal
import sqlite3
import subprocess
import threading
import urllib.request
from collections.abc import Iterator
from pathlib import Path

from follower.send.transfer import Transfer, TransferBook
from tests.conftest import TALK, Agent, RelayProcess, befriend, free_port, make_agent, wait_for

MB = 1024 * 1024


def fingerprint(agent: Agent) -> str:
    return str(agent.ok("id", "--json").json()["fingerprint"])


def mail_waiting(relay: RelayProcess, fp: str) -> int:
    with contextlib.closing(sqlite3.connect(relay.db)) as db:
        return int(db.execute("SELECT COUNT(*) FROM mail WHERE fp = ?", (fp,)).fetchone()[0])


def pending(alice: Agent) -> list[Transfer]:
    """Alice's unfinished transfers, read as talk reads them: the follower may finish one meanwhile."""
    return list(TransferBook(alice.home / "alice").pending())


def write_random(path: Path, size: int, seed: int) -> str:
    rng, digest = random.Random(seed), hashlib.sha256()
    with path.open("wb") as f:
        for _ in range(size // MB):
            block = rng.randbytes(MB)
            digest.update(block)
            f.write(block)
    return digest.hexdigest()


class Sampled:
    """A `talk` process whose resident memory is sampled until it ends."""

    def __init__(self, agent: Agent, *args: str) -> None:
        self.proc = subprocess.Popen([TALK, *args], env=agent.env(), stdin=subprocess.DEVNULL,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.peak_kb = 0
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()

    def _sample(self) -> None:
        status = Path(f"/proc/{self.proc.pid}/status")
        while not self._done.wait(0.02):
            with contextlib.suppress(OSError):
                for line in status.read_text().splitlines():
                    if line.startswith("VmRSS:"):
                        self.peak_kb = max(self.peak_kb, int(line.split()[1]))

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.wait()

    def wait(self, timeout: float = 120) -> tuple[int, str, str]:
        out, err = self.proc.communicate(timeout=timeout)
        self._done.set()
        self._thread.join()
        return self.proc.returncode, out.decode(), err.decode()


def file_next(relay: RelayProcess, fp: str, file_id: str) -> int:
    with urllib.request.urlopen(f"{relay.url}/v1/files/{fp}/{file_id}", timeout=5) as r:
        return int(json.loads(r.read())["next"])


@contextlib.contextmanager
def metered_relay(tmp_path: Path) -> Iterator[tuple[RelayProcess, int]]:
    port = free_port()
    # Chunks at a rate the sender cannot outrun: it is killed mid-way however fast this machine is.
    extra = ["--metrics-port", str(port), "--rate-chunks", "150/1:40"]
    relay = RelayProcess(tmp_path / "relay" / "relay.db", free_port(), extra=extra)
    relay.start()
    try:
        yield relay, port
    finally:
        relay.stop()


@contextlib.contextmanager
def metered_pair(tmp_path: Path) -> Iterator[tuple[RelayProcess, Agent, str]]:
    """A metered relay, alice befriended with bob on it, and bob's fingerprint."""
    with metered_relay(tmp_path) as (relay, _):
        alice, bob = make_agent(tmp_path, relay, "alice", None), make_agent(tmp_path, relay, "bob", None)
        befriend(alice, bob)
        yield relay, alice, fingerprint(bob)


def killed_mid_upload(alice: Agent, relay: RelayProcess, bob_fp: str, src: Path) -> Transfer:
    """`talk send bob --file src` killed once the relay holds a chunk of it: its transfer."""
    return killed_holding(alice, relay, bob_fp, 1, "--file", str(src))[1]


def killed_holding(alice: Agent, relay: RelayProcess, bob_fp: str, chunks: int,
                   *args: str) -> tuple[Sampled, Transfer]:
    """`talk send bob ARGS` (one file) killed once the relay holds `chunks` chunks of it: the
    sampled run and its transfer."""
    sender = Sampled(alice, "send", "bob", *args)
    transfer = wait_for(lambda: next(iter(pending(alice)), None), 60, "the transfer record")
    file_id = transfer.files[0].id
    wait_for(lambda: file_next(relay, bob_fp, file_id) >= chunks or None, 60, f"{chunks} chunks on the relay")
    sender.kill()
    return sender, transfer


def chunks_taken(metrics_port: int) -> float:
    """Chunk puts the relay answered since it started, less those refused for the rate."""
    with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=5) as r:
        lines = r.read().decode().splitlines()

    def value(prefix: str) -> float:
        return sum(float(line.split()[-1]) for line in lines if line.startswith(prefix))

    return value('talk_relay_request_seconds_count{route="put_chunk"}') - value(
        'talk_relay_errors_total{code="rate_limited"}')
