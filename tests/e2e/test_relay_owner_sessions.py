"""Owner tokens (`relay.owner_tokens`; the wire calls them sessions) against a real relay
process: one signature, then MACs.

The token's key travels sealed to the owner's box key; a MAC made with it authenticates one
request of that owner on that route, once, inside the time window; a restart forgets every
session and a long-lived client opens a new one by itself.
"""

from __future__ import annotations

import http.client
import json
import secrets
import time
from typing import Any

import pytest
from nacl.exceptions import CryptoError

from durable.errors import RelayError
from follower.relay.client import RelayClient
from keys.encoding import b64d, b64e
from keys.identity import Identity
from keys.wire import (
    MAC_HEADER,
    NONCE_HEADER,
    SESSION_HEADER,
    TIME_HEADER,
    auth_headers,
    session_headers,
    session_mac,
)
from tests.conftest import RelayProcess


def call(relay: RelayProcess, path: str, body: bytes, headers: dict[str, str]) -> tuple[int, Any]:
    conn = http.client.HTTPConnection("127.0.0.1", relay.port, timeout=10)
    try:
        conn.request("POST", path, body=body, headers=headers)
        response = conn.getresponse()
        return response.status, json.loads(response.read())
    finally:
        conn.close()


def publish(relay: RelayProcess, name: str) -> Identity:
    identity = Identity.generate(name)
    with RelayClient(relay.url) as client:
        client.publish(identity.bundle())
    return identity


def open_session(relay: RelayProcess, owner: Identity) -> tuple[str, bytes, dict[str, Any]]:
    path = f"/v1/mail/{owner.fingerprint}/session"
    status, data = call(relay, path, b"", auth_headers(owner.sign, "POST", path, b""))
    assert status == 201, data
    assert set(data) == {"session", "key", "expires"}, data
    assert data["expires"] > time.time() + 600
    return data["session"], owner.unseal(b64d(data["key"])), data


def deposit(relay: RelayProcess, owner: Identity, tag: str, blob: bytes) -> str:
    with RelayClient(relay.url) as client:
        return client.deposit(owner.fingerprint, tag, blob)


def fetch_path(owner: Identity) -> str:
    return f"/v1/mail/{owner.fingerprint}/fetch"


def test_a_session_key_opens_only_for_the_owner(relay: RelayProcess) -> None:
    alice, mallory = publish(relay, "alice"), publish(relay, "mallory")
    _, key, data = open_session(relay, alice)
    assert len(key) == 32
    sealed = b64d(data["key"])
    assert key not in sealed
    with pytest.raises(CryptoError):
        mallory.unseal(sealed)


def test_a_session_needs_the_owners_signature(relay: RelayProcess) -> None:
    alice, mallory = publish(relay, "alice"), publish(relay, "mallory")
    path = f"/v1/mail/{alice.fingerprint}/session"
    status, data = call(relay, path, b"", auth_headers(mallory.sign, "POST", path, b""))
    assert (status, data["error"]) == (403, "forbidden")
    status, data = call(relay, path, b"", {})
    assert (status, data["error"]) == (401, "unauthorized")


def test_a_maced_fetch_reads_and_acks(relay: RelayProcess) -> None:
    alice = publish(relay, "alice")
    tag = secrets.token_hex(16)
    mail_id = deposit(relay, alice, tag, b"hello")
    sid, key, _ = open_session(relay, alice)
    body = json.dumps({"tags": [tag]}).encode()
    status, data = call(relay, fetch_path(alice), body,
                        session_headers(sid, key, 1, "POST", fetch_path(alice), body))
    assert status == 200, data
    assert [(m["id"], b64d(m["blob"])) for m in data["messages"]] == [(mail_id, b"hello")]
    body = json.dumps({"tags": [tag], "ack": [mail_id]}).encode()
    status, data = call(relay, fetch_path(alice), body,
                        session_headers(sid, key, 2, "POST", fetch_path(alice), body))
    assert (status, data["deleted"], data["messages"]) == (200, 1, [])


Refusal = tuple[str, dict[str, str], int, str]


def refusals(alice: Identity, sid: str, key: bytes, other: Identity) -> dict[str, Refusal]:
    """label → (path, headers, status, error) for requests the relay must refuse."""
    path = fetch_path(alice)
    body = json.dumps({"tags": ["a" * 32], "ack": ["1"]}).encode()
    good = session_headers(sid, key, 1, "POST", path, body)
    stale_ts = str(int(time.time()) - 3600)
    nonce = f"{1:016d}"
    stale = {TIME_HEADER: stale_ts, NONCE_HEADER: nonce, SESSION_HEADER: sid,
             MAC_HEADER: b64e(session_mac(key, "POST", path, stale_ts, nonce, body))}
    return {
        "wrong-key": (path, session_headers(sid, secrets.token_bytes(32), 1, "POST", path, body), 403,
                      "forbidden"),
        "other-route": (path, session_headers(sid, key, 1, "POST", f"/v1/mail/{alice.fingerprint}/ack",
                                              body), 403, "forbidden"),
        "other-mailbox": (fetch_path(other), session_headers(sid, key, 1, "POST", fetch_path(other), body),
                          403, "forbidden"),
        "unknown-session": (path, session_headers(secrets.token_hex(16), key, 1, "POST", path, body), 401,
                            "session_expired"),
        "mac-missing": (path, {k: v for k, v in good.items() if k != MAC_HEADER}, 401, "unauthorized"),
        "mac-garbage": (path, {**good, MAC_HEADER: "%%%"}, 403, "forbidden"),
        "stale": (path, stale, 401, "unauthorized"),
    }


@pytest.mark.own_relay  # mail ids count from 1 on a relay of its own
@pytest.mark.parametrize("label", ["wrong-key", "other-route", "other-mailbox", "unknown-session",
                                   "mac-missing", "mac-garbage", "stale"])
def test_a_bad_mac_is_refused_and_changes_nothing(relay: RelayProcess, label: str) -> None:
    alice, bob = publish(relay, "alice"), publish(relay, "bob")
    tag = secrets.token_hex(16)
    mail_id = deposit(relay, alice, tag, b"keep me")
    assert mail_id == "1"  # the refused bodies try to ack id 1
    sid, key, _ = open_session(relay, alice)
    path, headers, status, error = refusals(alice, sid, key, bob)[label]
    body = json.dumps({"tags": ["a" * 32], "ack": ["1"]}).encode()
    got, data = call(relay, path, body, headers)
    assert (got, data["error"]) == (status, error), data
    assert data["message"]
    with RelayClient(relay.url) as client:
        mail, _ = client.fetch(alice, [tag])
    assert [m.id for m in mail] == [mail_id]


def test_a_replayed_or_ancient_counter_is_refused(relay: RelayProcess) -> None:
    alice = publish(relay, "alice")
    sid, key, _ = open_session(relay, alice)
    body = json.dumps({"tags": ["a" * 32]}).encode()

    def send(counter: int | str) -> tuple[int, Any]:
        headers = session_headers(sid, key, 1, "POST", fetch_path(alice), body)
        ts = headers[TIME_HEADER]
        nonce = counter if isinstance(counter, str) else f"{counter:016d}"
        mac = session_mac(key, "POST", fetch_path(alice), ts, nonce, body)
        return call(relay, fetch_path(alice), body,
                    {**headers, NONCE_HEADER: nonce, MAC_HEADER: b64e(mac)})

    assert send(5)[0] == 200
    assert send(3)[0] == 200  # out of order inside the window: two threads may race
    for label, counter in (("replay", 5), ("replay-late", 3), ("zero", 0), ("not-a-number", "a" * 16)):
        status, data = send(counter)
        assert (status, data["error"]) == (401, "unauthorized"), label
    assert send(5000)[0] == 200
    status, data = send(4)  # more than the window behind the highest: cannot be told apart
    assert status == 401 and "replayed" in data["message"]


@pytest.mark.own_relay
def test_the_client_opens_a_new_session_after_a_restart(relay: RelayProcess) -> None:
    alice = publish(relay, "alice")
    tag = secrets.token_hex(16)
    client = RelayClient(relay.url, sessions=True)
    try:
        assert client.fetch(alice, [tag]) == ([], False)
        first = client._sessions[alice.fingerprint].sid
        relay.stop()
        relay.start()
        mail_id = deposit(relay, alice, tag, b"after the restart")
        mail, _ = client.fetch(alice, [tag])
        assert [m.blob for m in mail] == [b"after the restart"]
        assert client._sessions[alice.fingerprint].sid != first
        assert client.fetch(alice, [tag], ack=[mail_id]) == ([], False)
    finally:
        client.close()


class SignOnly:
    """An owner that can sign and open sealed keys but has no bundle to publish."""

    def __init__(self, identity: Identity) -> None:
        self.identity = identity
        self.fingerprint = identity.fingerprint

    def sign(self, message: bytes) -> bytes:
        return self.identity.sign(message)

    def unseal(self, blob: bytes) -> bytes:
        return self.identity.unseal(blob)


def test_a_session_client_still_reports_real_refusals(relay: RelayProcess) -> None:
    stranger = Identity.generate("stranger")  # never published: the relay cannot seal to it
    with RelayClient(relay.url, sessions=True) as client, pytest.raises(RelayError) as err:
        client.fetch(SignOnly(stranger), ["a" * 32])
    assert err.value.status == 404 and "unknown mailbox" in err.value.message


def test_an_identity_the_relay_does_not_know_is_published_and_served(relay: RelayProcess) -> None:
    newcomer = Identity.generate("newcomer")  # as if `talk init` could not reach the relay
    with RelayClient(relay.url, sessions=True) as client:
        assert client.fetch(newcomer, ["a" * 32]) == ([], False)
        assert client.republished_at is not None
        assert client.bundle(newcomer.fingerprint).fingerprint == newcomer.fingerprint
