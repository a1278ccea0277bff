"""Raw calls to a real relay for the e2e tests: signed requests, deposits, fetches, a stream.

They speak HTTP with the standard library on purpose, so the relay is tested on the wire and
not through the client code it would be testing.
"""

from __future__ import annotations

import base64
import contextlib
import http.client
import json
import secrets
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from websockets.sync.client import ClientConnection, connect

from follower.relay.push import stream_url
from keys.encoding import b64e
from keys.identity import Identity
from keys.wire import (
    NONCE_HEADER,
    SIGNATURE_HEADER,
    TIME_HEADER,
    auth_headers,
    signing_payload,
)
from tests.conftest import RelayProcess, free_port


@dataclass(frozen=True)
class Reply:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


def call(
    relay: RelayProcess, method: str, path: str, body: bytes | Iterator[bytes] = b"",
    headers: dict[str, str] | None = None,
) -> Reply:
    """One request on its own connection; an iterator body goes out chunked."""
    conn = http.client.HTTPConnection("127.0.0.1", relay.port, timeout=10)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        response = conn.getresponse()
        head = {k.lower(): v for k, v in response.getheaders()}
        return Reply(response.status, head, response.read())
    finally:
        conn.close()


def jbody(obj: Any) -> bytes:
    return json.dumps(obj).encode()


def signed(
    relay: RelayProcess, signer: Identity, method: str, path: str, body: bytes
) -> Reply:
    return call(relay, method, path, body, auth_headers(signer.sign, method, path, body))


def stale_headers(signer: Identity, method: str, path: str, body: bytes, age: int) -> dict[str, str]:
    """Correctly signed headers whose time is `age` seconds in the past (negative: future)."""
    ts, nonce = str(int(time.time()) - age), secrets.token_hex(16)
    signature = signer.sign(signing_payload(method, path, ts, nonce, body))
    return {TIME_HEADER: ts, NONCE_HEADER: nonce, SIGNATURE_HEADER: b64e(signature)}


def assert_error(reply: Reply, status: int, code: str, says: str = "") -> str:
    """The relay's one error shape; returns the message."""
    assert reply.status == status, (reply.status, reply.body[:300])
    assert reply.headers.get("content-type", "").startswith("application/json"), reply.headers
    data = reply.json()
    assert isinstance(data, dict) and set(data) == {"error", "message"}, data
    assert data["error"] == code, data
    message = data["message"]
    assert isinstance(message, str) and message.strip(), data
    assert says.lower() in message.lower(), (says, message)
    return message


def new_tag() -> str:
    return secrets.token_hex(16)


def publish(relay: RelayProcess, name: str = "alice") -> Identity:
    identity = Identity.generate(name)
    reply = call(relay, "PUT", f"/v1/keys/{identity.fingerprint}", jbody(identity.bundle().to_json()))
    assert reply.status == 200, reply.body
    assert reply.json() == {"fingerprint": identity.fingerprint}
    return identity


def deposit(relay: RelayProcess, fp: str, tag: str, blob: bytes) -> str:
    reply = call(relay, "POST", f"/v1/mail/{fp}/{tag}", blob,
                 {"content-type": "application/octet-stream"})
    assert reply.status == 201, reply.body
    data = reply.json()
    assert set(data) == {"id"} and isinstance(data["id"], str) and data["id"], data
    return str(data["id"])


def fetch(relay: RelayProcess, owner: Identity, tags: list[str], **extra: Any) -> dict[str, Any]:
    path = f"/v1/mail/{owner.fingerprint}/fetch"
    reply = signed(relay, owner, "POST", path, jbody({"tags": tags, **extra}))
    assert reply.status == 200, reply.body
    data = reply.json()
    assert set(data) == {"messages", "more", "deleted"} and isinstance(data["more"], bool), data
    for m in data["messages"]:
        assert set(m) == {"id", "tag", "blob", "ts"}, m
    return dict(data)


def waiting(relay: RelayProcess, owner: Identity, tags: list[str]) -> dict[str, bytes]:
    """id → blob of the mail waiting under `tags`."""
    messages = fetch(relay, owner, tags)["messages"]
    return {m["id"]: base64.b64decode(m["blob"]) for m in messages}


def ack(relay: RelayProcess, owner: Identity, ids: list[str]) -> Reply:
    path = f"/v1/mail/{owner.fingerprint}/ack"
    return signed(relay, owner, "POST", path, jbody({"ids": ids}))


def open_slot(relay: RelayProcess, owner: Identity, tag: str, expires: float) -> Reply:
    path = f"/v1/invites/{owner.fingerprint}"
    return signed(relay, owner, "POST", path, jbody({"tag": tag, "expires": expires}))


def mail_rows(db: Path) -> int:
    with contextlib.closing(sqlite3.connect(db)) as conn:
        return int(conn.execute("SELECT COUNT(*) FROM mail").fetchone()[0])


@contextlib.contextmanager
def relay_with(tmp_path: Path, *extra: str, env: dict[str, str] | None = None) -> Iterator[RelayProcess]:
    relay = RelayProcess(tmp_path / "extra-relay" / "relay.db", free_port(), extra=list(extra), env=env or {})
    relay.start()
    try:
        yield relay
    finally:
        relay.stop()


@contextmanager
def relay_on(kind: str, tmp_path: Path, *extra: str) -> Iterator[RelayProcess]:
    """A relay process on SQLite (`kind` "sqlite"), or on the real Redis server under a prefix of
    its own ("redis"), with the options `extra`."""
    from tests.redis_support import StoreRelay, redis_prefix, require_redis

    if kind == "sqlite":
        relay = RelayProcess(tmp_path / "relay" / "relay.db", free_port(), extra=list(extra)).start()
        try:
            yield relay
        finally:
            relay.stop()
        return
    with redis_prefix() as prefix:
        on_redis = StoreRelay(tmp_path / "unused.db", free_port(), extra=list(extra),
                              store=f"{require_redis()}?prefix={prefix}")
        try:
            yield on_redis.start()
        finally:
            on_redis.stop()


@contextmanager
def open_stream(relay: RelayProcess, me: Identity) -> Iterator[ClientConnection]:
    url, path = stream_url(relay.url, me.fingerprint)
    with connect(url, additional_headers=auth_headers(me.sign, "GET", path, b"")) as ws:
        assert json.loads(ws.recv(timeout=5)) == {"type": "ready"}
        yield ws
