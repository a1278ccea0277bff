"""What `talk receive` and `talk send` load, by sys.modules (never by timing): agents run them on
every turn, so the plain forms stay off typer's command tree and the modules of the paths they do
not take (see `follower`'s docstring)."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.conftest import Agent

# Runs `talk ARGS` as the console script does, then prints the modules it loaded on stderr's last line.
RUN = """
import json, sys
from talk.__main__ import main
try:
    main(sys.argv[1:])
except SystemExit:
    pass
sys.stderr.write("\\n" + json.dumps(sorted(sys.modules)) + "\\n")
"""

NEVER = {
    "typer",
    "click",
    "talk.cli",
    "asyncio",
    "logging",
    "follower.daemon.daemon",
    "follower.daemon.state",
}
# PyNaCl's wrappers load every binding module it has; talk calls its compiled module (keys.sodium).
NACL_WRAPPERS = {"nacl.bindings", "nacl.public", "nacl.secret", "nacl.signing", "nacl.utils", "nacl.encoding"}
# Beside those, what one chat message from a contact never needs.
NOT_FOR_ONE_MESSAGE = {
    "dataclasses",
    "inspect",
    "secrets",
    "nacl.pwhash",
    "follower.send.outbound",
    "follower.send.outbox",
    "follower.groups.group_inbound",
    "keys.groups.sessions",
    "follower.receive.joining",
    "follower.receive.recovery",
    "follower.receive.quarantine",
    "follower.held",
    "follower.tasks.mesh",
    "keys.fileref",
    "keys.filestream",
    "keys.ratchet.inflight",
    "socket",  # a plain-HTTP relay is spoken to on the C module (`follower.relay.http11`)
    "selectors",
    *NACL_WRAPPERS,
}
# OpenSSL's libcrypto, through hashlib or hmac: durable.digests has what talk hashes with. Only a
# session's beginning loads it (reading the new session's chains: `keys.ratchet.late`).
OPENSSL = {"_hashlib", "hashlib", "hmac"}
# What a send of a short text never needs: the machinery of files and long texts.
NOT_FOR_A_SHORT_TEXT = {"follower.send.upload", "follower.send.transfer", "keys.fileref", "keys.filestream",
                        "durable.backoff", "random", "socket", "selectors", *NACL_WRAPPERS}


def loaded(agent: Agent, *args: str) -> tuple[str, set[str]]:
    p = subprocess.run(
        [sys.executable, "-c", RUN, *args],
        capture_output=True,
        text=True,
        env=agent.env(),
        stdin=subprocess.DEVNULL,
        timeout=30,
    )
    *err, modules = p.stderr.rstrip("\n").split("\n")
    assert p.returncode == 0, err
    return p.stdout, set(json.loads(modules))


def test_receive_of_one_message_loads_only_its_own_path(pair: tuple[Agent, Agent]) -> None:
    alice, bob = pair
    alice.ok("send", "bob", "hello")
    out, modules = loaded(bob, "receive")
    assert [json.loads(line)["text"] for line in out.splitlines()] == ["hello"]
    assert "follower.receive.inbound" in modules  # the run went down the real path
    assert modules & (NEVER | NOT_FOR_ONE_MESSAGE) == set()
    alice.ok("send", "bob", "again")  # the session's next message: what agents meet every turn
    out, modules = loaded(bob, "receive")
    assert [json.loads(line)["text"] for line in out.splitlines()] == ["again"]
    assert modules & (NEVER | NOT_FOR_ONE_MESSAGE | OPENSSL) == set()


def test_send_stays_off_typer(pair: tuple[Agent, Agent]) -> None:
    _, bob = pair
    out, modules = loaded(bob, "send", "alice", "hi")
    assert out.startswith("sent ") and "follower.send.outbound" in modules
    assert modules & (NEVER | NOT_FOR_A_SHORT_TEXT | OPENSSL) == set()
    # Hybrid sealing takes ML-KEM from pyca/cryptography's Rust module, not its costlier public face.
    assert "cryptography.hazmat.bindings._rust" in modules
    assert "cryptography.hazmat.primitives.asymmetric.mlkem" not in modules
