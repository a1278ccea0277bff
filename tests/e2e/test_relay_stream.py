"""The relay's push stream over a real WebSocket: owner-only, and prompt."""

from __future__ import annotations

import base64
import json
import time

import pytest
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect

from follower.relay.client import RelayClient
from follower.relay.push import stream_url
from keys.identity import Identity
from keys.wire import auth_headers, signing_payload
from relay.notify import PUSH_BLOB_MAX
from tests.conftest import RelayProcess


def published(relay: RelayProcess, name: str) -> Identity:
    me = Identity.generate(name)
    with RelayClient(relay.url) as client:
        client.publish(me.bundle())
    return me


def test_owner_hears_of_each_deposit_with_its_blob(relay: RelayProcess) -> None:
    me = published(relay, "bob")
    url, path = stream_url(relay.url, me.fingerprint)
    tags = ["ab" * 16, "cd" * 16]
    with RelayClient(relay.url) as owner:
        owner.fetch(me, tags)  # registers them: mail under tags never fetched comes without blobs
    with connect(url, additional_headers=auth_headers(me.sign, "GET", path, b"")) as ws:
        assert json.loads(ws.recv(timeout=5)) == {"type": "ready"}
        with RelayClient(relay.url) as client:
            for tag in tags:
                mail_id = client.deposit(me.fingerprint, tag, b"sealed")
                blob = base64.b64encode(b"sealed").decode()
                frame = {"type": "mail", "tag": tag, "id": mail_id, "blob": blob}
                assert json.loads(ws.recv(timeout=5)) == frame


def test_a_big_blob_is_left_to_the_fetch(relay: RelayProcess) -> None:
    me = published(relay, "bob")
    url, path = stream_url(relay.url, me.fingerprint)
    with RelayClient(relay.url) as owner:
        owner.fetch(me, ["ab" * 16])
    with connect(url, additional_headers=auth_headers(me.sign, "GET", path, b"")) as ws:
        ws.recv(timeout=5)
        with RelayClient(relay.url) as client:
            client.deposit(me.fingerprint, "ab" * 16, b"x" * (PUSH_BLOB_MAX + 1))
        assert json.loads(ws.recv(timeout=5)) == {"type": "mail", "tag": "ab" * 16}


def test_other_mailboxes_are_silent(relay: RelayProcess) -> None:
    me, other = published(relay, "bob"), published(relay, "carol")
    url, path = stream_url(relay.url, me.fingerprint)
    with connect(url, additional_headers=auth_headers(me.sign, "GET", path, b"")) as ws:
        ws.recv(timeout=5)
        with RelayClient(relay.url) as client:
            client.deposit(other.fingerprint, "ab" * 16, b"sealed")
        with pytest.raises(TimeoutError):
            ws.recv(timeout=0.5)


def _refused(url: str, headers: dict[str, str]) -> tuple[int, dict[str, str]]:
    with pytest.raises(InvalidStatus) as caught, connect(url, additional_headers=headers):
        pass
    response = caught.value.response
    return response.status_code, json.loads(bytes(response.body or b""))


def test_strangers_stale_and_unknown_are_refused(relay: RelayProcess) -> None:
    me, stranger = published(relay, "bob"), published(relay, "mallory")
    url, path = stream_url(relay.url, me.fingerprint)
    status, body = _refused(url, auth_headers(stranger.sign, "GET", path, b""))
    assert status == 403 and body["error"] == "forbidden"

    old = str(int(time.time()) - 600)
    nonce = "a" * 32
    sig = me.sign(signing_payload("GET", path, old, nonce, b""))
    stale = {"x-talk-time": old, "x-talk-nonce": nonce, "x-talk-signature": base64.b64encode(sig).decode()}
    assert _refused(url, stale)[0] == 401

    headers = auth_headers(me.sign, "GET", path, b"")
    with connect(url, additional_headers=headers) as ws:
        assert json.loads(ws.recv(timeout=5))["type"] == "ready"
    assert _refused(url, headers)[0] == 401  # replayed handshake

    ghost = Identity.generate("ghost")
    url, path = stream_url(relay.url, ghost.fingerprint)
    assert _refused(url, auth_headers(ghost.sign, "GET", path, b""))[0] == 404


def test_the_push_is_written_before_the_deposit_is_answered(relay: RelayProcess) -> None:
    """The owner's follower starts waking while the sender reads its answer: on loopback a
    frame written before the answer is in the stream's socket when the answer is read."""
    import select

    from follower.relay.stream import Stream

    me = published(relay, "bob")
    url, path = stream_url(relay.url, me.fingerprint)
    tag = "ab" * 16
    with RelayClient(relay.url) as owner:
        owner.fetch(me, [tag])
    headers = auth_headers(me.sign, "GET", path, b"")
    with Stream.open(url, headers, 10, 64 * 1024) as stream, RelayClient(relay.url) as client:
        frames = stream.messages()
        assert json.loads(next(frames)) == {"type": "ready"}
        for n in range(20):
            mail_id = client.deposit(me.fingerprint, tag, b"sealed %d" % n)
            assert select.select([stream.fileno()], [], [], 0)[0], f"deposit {n}: answered before its push"
            assert json.loads(next(frames))["id"] == mail_id
