"""`talk demo`: a relay and two identities on this machine, talking through it.

Everything lives in a temporary folder removed at the end; the relay listens on a free
loopback port only for the demo's lifetime.
"""

from __future__ import annotations

import socket
import statistics
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from follower.account import Account
from keys import keystore
from keys.identity import Identity
from keys.safety import safety_number
from relay.config import RelayConfig
from relay.server import build_server


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Peer:
    """One side of the demo, with its own home folder as if on its own machine."""

    def __init__(self, root: Path, name: str, url: str) -> None:
        self.identity = Identity.generate(name)
        folder = keystore.create(root / name, self.identity, None, url)
        self.account = Account(keystore.load(folder), url, unlocked=self.identity)
        self.account.publish()

    def send(self, name: str, text: str) -> None:
        self.account.send(name, text)

    def receive(self) -> list[dict[str, Any]]:
        got: list[dict[str, Any]] = []
        self.account.receive(got.append)
        return got


def _say(line: str) -> None:
    print(line, flush=True)


def run_demo(rounds: int = 5) -> None:
    with tempfile.TemporaryDirectory(prefix="talk-demo-") as tmp:
        root = Path(tmp)
        port = _free_port()
        server = build_server("127.0.0.1", port, root / "relay.db", RelayConfig())
        thread = threading.Thread(target=server.run, daemon=True)
        thread.start()
        try:
            _wait_started(server)
            _converse(root, f"http://127.0.0.1:{port}", rounds)
        finally:
            server.should_exit = True
            thread.join(timeout=10)


def _wait_started(server: Any) -> None:
    deadline = time.monotonic() + 10
    while not server.started:
        if time.monotonic() > deadline:
            raise RuntimeError("the demo relay did not start")
        time.sleep(0.01)


def _converse(root: Path, url: str, rounds: int) -> None:
    _say(f"relay    {url} (temporary SQLite store)")
    alice, bob = Peer(root, "alice", url), Peer(root, "bob", url)
    _say(f"alice    {alice.identity.fingerprint}")
    _say(f"bob      {bob.identity.fingerprint}")
    code = alice.account.invite(days=1)
    _say(f"alice invites bob with {code.encode()[:24]}…")
    bob.account.join(code.encode())
    accepted = alice.receive()
    _say(f"alice ← {accepted[0]['text']}")
    _say(f"bob   ← {bob.receive()[0]['text']}")
    number = safety_number(alice.identity.fingerprint, bob.identity.fingerprint)
    _say(f"safety number (both sides): {number}")
    trips = []
    for i in range(rounds):
        start = time.perf_counter()
        alice.send("bob", f"ping {i + 1}: any news on the build?")
        heard = bob.receive()
        bob.send("alice", f"pong {i + 1}: green, {len(heard)} message(s) read")
        answer = alice.receive()
        trips.append((time.perf_counter() - start) * 1000)
        if i == 0 or i == rounds - 1:
            _say(f"alice → bob: {heard[0]['text']}")
            _say(f"bob → alice: {answer[0]['text']}")
    _say(f"{rounds} round trips (send, receive, reply, receive) through the relay: "
         f"median {statistics.median(trips):.1f} ms, best {min(trips):.1f} ms")
    _say("the relay stored only sealed blobs and deleted each on acknowledgement; done.")
