"""What the relay sees of a follower's traffic: owner requests and deposits never share a
connection, a deposit connection serves one recipient, and the follower's receipts leave a
random pause after the fetch that brought the mail.

A recording proxy sits between a real relay and bob's follower, bob's `talk send`, and the
senders' `talk send --wait` (which fetch their receipts themselves), and notes every request
line per accepted connection, as a relay would see them.
"""

from __future__ import annotations

import json
import re
import socket
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from tests.conftest import Agent, RelayProcess, befriend, make_agent, wait_for
from tests.faults import DyingProxy, read_request

JITTER = (0.3, 0.6)
OWNER_ROUTE = re.compile(r"(POST /v1/mail/[0-9a-f]+/(fetch|ack|session)|GET /v1/mail/[0-9a-f]+/stream"
                         r"|POST /v1/invites/|PUT /v1/keys/) ")
DEPOSIT_ROUTE = re.compile(r"POST /v1/(mail/(?P<fp>[0-9a-f]+)/(?!fetch |ack |session )[^/ ]+|redeem/\S+) ")


@dataclass
class Seen:
    at: float
    line: str
    brought_mail: bool = False


class RecordingProxy(DyingProxy):
    """Forwards everything; `connections` holds, per accepted connection, what came on it."""

    def __init__(self, upstream_port: int) -> None:
        self.connections: list[list[Seen]] = []
        self.guard = threading.Lock()
        super().__init__(upstream_port, lambda _: False)

    def _handle(self, conn: socket.socket) -> None:
        seen: list[Seen] = []
        with self.guard:
            self.connections.append(seen)
        with conn:
            while (raw := read_request(conn)) is not None:
                item = Seen(time.monotonic(), raw.split(b"\r\n", 1)[0].decode())
                answer = self._forward(raw)
                if item.line.endswith("/fetch HTTP/1.1"):
                    body = answer.partition(b"\r\n\r\n")[2]
                    item.brought_mail = bool(json.loads(body).get("messages"))
                seen.append(item)
                conn.sendall(answer)

    def snapshot(self) -> list[list[Seen]]:
        with self.guard:
            return [list(c) for c in self.connections if c]


def deposits_to(seen: list[Seen]) -> set[str]:
    return {m["fp"] or "redeem" for s in seen if (m := DEPOSIT_ROUTE.match(s.line))}


def test_owner_requests_and_deposits_never_share_a_connection(
    tmp_path: Path, relay: RelayProcess, pair: tuple[Agent, Agent]
) -> None:
    alice, bob = pair
    carol = make_agent(tmp_path, relay, "carol", None)
    befriend(bob, carol)
    proxy = RecordingProxy(relay.port)
    bob.extra_env["TALK_DEPOSIT_JITTER"] = ",".join(map(str, JITTER))
    bob.ok("follow", "--peer", "alice", "--peer", "carol", "--no-push", "--interval", "0.3",
           "--relay", proxy.url)
    try:
        # Each sender (no follower of its own) deposits, then fetches until bob's follower's
        # "spooled" receipt comes: one CLI process with both kinds of request, also recorded.
        for sender in (alice, carol, alice):
            sender.ok("send", "bob", f"hello from {sender.home.name}", "--wait", "spooled",
                      "--relay", proxy.url)
        bob.ok("send", "alice", "and back", "--relay", proxy.url)
        bob.ok("send", "carol", "and back", "--relay", proxy.url)
    finally:
        bob.run("stop")
    wait_for(lambda: not bob.ok("status", "--json").json()["follower"]["running"], 10, "the stop")

    connections = proxy.snapshot()
    owner = [c for c in connections if any(OWNER_ROUTE.match(s.line) for s in c)]
    depositing = [c for c in connections if deposits_to(c)]
    assert owner and len(depositing) >= 2, [[s.line for s in c] for c in connections]
    for seen in connections:
        lines = [s.line for s in seen]
        assert not (any(OWNER_ROUTE.match(x) for x in lines) and deposits_to(seen)), lines
        assert len(deposits_to(seen)) <= 1, lines  # one recipient mailbox per connection
    bob_fp = bob.ok("id", "--json").json()["fingerprint"]
    recipients = set().union(*map(deposits_to, depositing))
    assert len(recipients) == 3 and bob_fp in recipients  # mail to bob; receipts and mail from him

    # Bob's first receipt left no sooner than the pause after his fetch that brought mail.
    requests = sorted((s for c in connections for s in c), key=lambda s: s.at)
    first_mail = next(s.at for s in requests if s.brought_mail and f"/mail/{bob_fp}/" in s.line)
    first_receipt = next(s.at for s in requests
                         if (m := DEPOSIT_ROUTE.match(s.line)) and m["fp"] != bob_fp)
    assert first_receipt - first_mail >= JITTER[0]
