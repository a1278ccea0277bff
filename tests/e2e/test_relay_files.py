"""The relay's file routes over real HTTP, on SQLite and on Redis: chunks in, progress, the owner's
fetch and ack; and each rule the relay keeps against a hostile uploader, as that attack."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from pathlib import Path

import pytest

from keys.filestream import ABYTES, CHUNK_BYTES
from keys.identity import Identity
from tests.conftest import RelayProcess
from tests.e2e.relay_calls import (
    Reply,
    assert_error,
    call,
    fetch,
    jbody,
    new_tag,
    publish,
    relay_on,
    relay_with,
    signed,
)

SMALL = b"\x01" * 100


@pytest.fixture(params=["sqlite", "redis"])
def relay(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[RelayProcess]:
    with relay_on(request.param, tmp_path) as relay:
        yield relay


def put(relay: RelayProcess, fp: str, tag: str, file_id: str, index: int | str, blob: bytes) -> Reply:
    return call(relay, "PUT", f"/v1/files/{fp}/{tag}/{file_id}/{index}", blob,
                {"content-type": "application/octet-stream"})


def progress(relay: RelayProcess, fp: str, file_id: str) -> dict[str, int]:
    reply = call(relay, "GET", f"/v1/files/{fp}/{file_id}")
    assert reply.status == 200, reply.body
    data = reply.json()
    assert set(data) == {"next", "bytes"}, data
    return dict(data)


def get_chunk(relay: RelayProcess, owner: Identity, file_id: str, index: object) -> Reply:
    return signed(relay, owner, "POST", f"/v1/files/{owner.fingerprint}/chunk",
                  jbody({"file": file_id, "index": index}))


def ack_files(relay: RelayProcess, owner: Identity, ids: list[str]) -> Reply:
    return signed(relay, owner, "POST", f"/v1/files/{owner.fingerprint}/ack", jbody({"files": ids}))


def test_a_file_goes_up_resumes_comes_down_and_is_gone_once_acked(relay: RelayProcess) -> None:
    bob = publish(relay, "bob")
    fp, tag, f = bob.fingerprint, new_tag(), secrets.token_hex(16)
    full = secrets.token_bytes(CHUNK_BYTES + ABYTES)
    assert progress(relay, fp, f) == {"next": 0, "bytes": 0}
    assert put(relay, fp, tag, f, 0, full).status == 201
    assert put(relay, fp, tag, f, 0, b"\x02" * 100).status == 200  # again: idempotent, nothing changes
    assert progress(relay, fp, f) == {"next": 1, "bytes": len(full)}
    assert put(relay, fp, tag, f, 1, SMALL).status == 201
    assert progress(relay, fp, f)["next"] == 2
    got = get_chunk(relay, bob, f, 0)
    assert got.status == 200 and got.body == full
    assert_error(get_chunk(relay, bob, f, 2), 404, "no_such_chunk")
    reply = ack_files(relay, bob, [f])
    assert reply.status == 200 and reply.json() == {"deleted": 1}
    assert_error(get_chunk(relay, bob, f, 0), 404, "no_such_chunk")
    assert progress(relay, fp, f) == {"next": 0, "bytes": 0}


def test_only_the_owner_reads_or_acks_a_file(relay: RelayProcess) -> None:
    bob, eve = publish(relay, "bob"), publish(relay, "eve")
    f = secrets.token_hex(16)
    assert put(relay, bob.fingerprint, new_tag(), f, 0, SMALL).status == 201
    path = f"/v1/files/{bob.fingerprint}/chunk"
    assert_error(call(relay, "POST", path, jbody({"file": f, "index": 0})), 401, "unauthorized")
    forged = signed(relay, eve, "POST", path, jbody({"file": f, "index": 0}))
    assert forged.status in (401, 403), forged.body  # eve's signature is not bob's
    # eve acking her own mailbox does not touch bob's file
    assert ack_files(relay, eve, [f]).json() == {"deleted": 0}
    assert get_chunk(relay, bob, f, 0).body == SMALL


def test_a_file_stays_under_its_tag(relay: RelayProcess) -> None:
    bob = publish(relay, "bob")
    f = secrets.token_hex(16)
    assert put(relay, bob.fingerprint, new_tag(), f, 0, SMALL).status == 201
    assert_error(put(relay, bob.fingerprint, new_tag(), f, 1, SMALL), 409, "file_conflict")


def test_strangers_cannot_fill_a_mailbox_with_files(relay: RelayProcess) -> None:
    """Files under tags the owner never read have their own small quota (16 files by default):
    junk fills that, and a contact's file still goes in."""
    bob = publish(relay, "bob")
    contact = new_tag()
    fetch(relay, bob, [contact])  # the owner reads its contact's channel: the tag is registered
    for _ in range(16):
        assert put(relay, bob.fingerprint, new_tag(), secrets.token_hex(16), 0, SMALL).status == 201
    assert_error(put(relay, bob.fingerprint, new_tag(), secrets.token_hex(16), 0, SMALL), 507,
                 "file_quota", "not read yet")
    assert put(relay, bob.fingerprint, contact, secrets.token_hex(16), 0, SMALL).status == 201


@pytest.mark.parametrize("path", [
    "/v1/files/{fp}/{tag}/{bad}/0",
    "/v1/files/{fp}/{bad}/{file}/0",
    "/v1/files/{bad}/{tag}/{file}/0",
    "/v1/files/{fp}/{tag}/{file}/-1",
    "/v1/files/{fp}/{tag}/{file}/1e3",
    "/v1/files/{fp}/{tag}/{file}/99999999999999999999",
    "/v1/files/{fp}/{tag}/..%2F..%2Fkeys/0",
    "/v1/files/{fp}/{tag}/{file}/0/..",
])
def test_bad_ids_and_indices_are_refused(relay: RelayProcess, path: str) -> None:
    bob = publish(relay, "bob")
    url = path.format(fp=bob.fingerprint, tag=new_tag(), file=secrets.token_hex(16),
                      bad=secrets.token_hex(16).upper())
    reply = call(relay, "PUT", url, SMALL)
    assert reply.status in (400, 404, 405), reply.body  # a bad value, or no such route: never stored
    assert reply.json()["error"] in ("bad_request", "not_found", "method_not_allowed")


@pytest.mark.parametrize("size", [0, ABYTES - 1])
def test_a_body_that_cannot_be_a_chunk_is_refused(relay: RelayProcess, size: int) -> None:
    bob = publish(relay, "bob")
    assert_error(put(relay, bob.fingerprint, new_tag(), secrets.token_hex(16), 0, b"x" * size), 400,
                 "bad_request")


def test_a_chunk_over_the_cap_is_refused_unread(relay: RelayProcess) -> None:
    bob = publish(relay, "bob")
    big = b"x" * (CHUNK_BYTES + ABYTES + 1)
    assert_error(put(relay, bob.fingerprint, new_tag(), secrets.token_hex(16), 0, big), 413, "too_large")


def test_no_mailbox_no_file(relay: RelayProcess) -> None:
    assert_error(put(relay, secrets.token_hex(16), new_tag(), secrets.token_hex(16), 0, SMALL), 404,
                 "unknown_mailbox")


@pytest.mark.parametrize("body", [{"file": "x", "index": 0}, {"file": "ab" * 16, "index": -1},
                                  {"file": "ab" * 16, "index": True}, {"file": "ab" * 16}])
def test_a_bad_chunk_request_is_refused(relay: RelayProcess, body: dict[str, object]) -> None:
    bob = publish(relay, "bob")
    reply = signed(relay, bob, "POST", f"/v1/files/{bob.fingerprint}/chunk", jbody(body))
    assert_error(reply, 400, "bad_request")


@pytest.mark.parametrize("ids", [[], ["../x"], ["AB" * 16], ["ab" * 16] * 101, "ab"])
def test_a_bad_ack_is_refused(relay: RelayProcess, ids: object) -> None:
    bob = publish(relay, "bob")
    reply = signed(relay, bob, "POST", f"/v1/files/{bob.fingerprint}/ack", jbody({"files": ids}))
    assert_error(reply, 400, "bad_request")


def test_file_and_mailbox_limits_are_relay_settings(tmp_path: Path) -> None:
    """Room for three full chunks in the mailbox, a file of two; one contact's channel holds at most
    its share (a quarter of the room, never under one largest file): here two chunks."""
    quota = str(3 * (CHUNK_BYTES + ABYTES))
    limits = ["--max-file-bytes", str(2 * CHUNK_BYTES), "--max-mailbox-file-bytes", quota]
    with relay_with(tmp_path, *limits) as relay:
        bob = publish(relay, "bob")
        alice, carol = new_tag(), new_tag()
        fetch(relay, bob, [alice, carol])
        full = b"x" * (CHUNK_BYTES + ABYTES)
        f, g = secrets.token_hex(16), secrets.token_hex(16)
        assert put(relay, bob.fingerprint, alice, f, 0, full).status == 201
        assert put(relay, bob.fingerprint, alice, f, 1, full).status == 201
        assert_error(put(relay, bob.fingerprint, alice, f, 2, SMALL), 413, "file_too_large")  # past its size
        assert_error(put(relay, bob.fingerprint, alice, secrets.token_hex(16), 0, SMALL), 507, "file_quota",
                     "its share")
        assert put(relay, bob.fingerprint, carol, g, 0, full).status == 201
        assert_error(put(relay, bob.fingerprint, carol, g, 1, full), 507, "file_quota")
        assert ack_files(relay, bob, [f]).json() == {"deleted": 1}
        assert put(relay, bob.fingerprint, carol, g, 1, full).status == 201  # acked room is free again


def test_a_file_over_the_limit_is_refused(tmp_path: Path) -> None:
    with relay_with(tmp_path, "--max-file-bytes", str(CHUNK_BYTES + 10)) as relay:
        bob = publish(relay, "bob")
        tag, f = new_tag(), secrets.token_hex(16)
        assert put(relay, bob.fingerprint, tag, f, 0, b"x" * (CHUNK_BYTES + ABYTES)).status == 201
        assert_error(put(relay, bob.fingerprint, tag, f, 1, b"x" * (ABYTES + 11)), 413, "file_too_large")
        # A chunk wholly past the limit says so too (not "bad index"): the sender stalls, not retries.
        assert_error(put(relay, bob.fingerprint, tag, f, 2, b"x" * (ABYTES + 1)), 413, "file_too_large")


def test_chunks_are_rate_limited_per_client(tmp_path: Path) -> None:
    with relay_with(tmp_path, "--rate-chunks", "1/60:3") as relay:
        bob = publish(relay, "bob")
        tag, f = new_tag(), secrets.token_hex(16)
        for i in range(3):
            assert put(relay, bob.fingerprint, tag, f, i, SMALL).status == 201
        reply = put(relay, bob.fingerprint, tag, f, 3, SMALL)
        assert_error(reply, 429, "rate_limited", "file chunks")
        assert int(reply.headers["retry-after"]) > 0


@pytest.mark.parametrize("sessions", [False, True])
def test_the_client_speaks_the_file_routes(relay: RelayProcess, sessions: bool) -> None:
    from durable.errors import RelayError
    from follower.relay.client import RelayClient

    bob = publish(relay, "bob")
    f, tag = secrets.token_hex(16), new_tag()
    blobs = [secrets.token_bytes(CHUNK_BYTES + ABYTES), secrets.token_bytes(ABYTES + 5)]
    with RelayClient(relay.url, timeout=5, sessions=sessions) as client:
        assert client.file_next(bob.fingerprint, f) == 0
        for i, blob in enumerate(blobs):
            client.put_chunk(bob.fingerprint, tag, f, i, blob)
        client.put_chunk(bob.fingerprint, tag, f, 1, blobs[1])  # again: accepted
        assert client.file_next(bob.fingerprint, f) == 2
        assert [client.get_chunk(bob, f, i) for i in (0, 1)] == blobs
        assert client.ack_files(bob, [f]) == 1
        with pytest.raises(RelayError) as err:
            client.get_chunk(bob, f, 0)
        assert err.value.code == "no_such_chunk"
        with pytest.raises(RelayError) as err:
            client.put_chunk(bob.fingerprint, tag, f, 0, b"x" * (CHUNK_BYTES + ABYTES + 1))
        assert err.value.status == 413


def test_the_owners_purge_takes_strangers_files_too(relay: RelayProcess) -> None:
    bob = publish(relay, "bob")
    contact, junk = new_tag(), new_tag()
    kept, gone = secrets.token_hex(16), secrets.token_hex(16)
    fetch(relay, bob, [contact])
    assert put(relay, bob.fingerprint, contact, kept, 0, SMALL).status == 201
    assert put(relay, bob.fingerprint, junk, gone, 0, SMALL).status == 201
    reply = signed(relay, bob, "POST", f"/v1/mail/{bob.fingerprint}/purge", jbody({}))
    assert reply.status == 200 and reply.json() == {"deleted": 0, "files": 1}
    assert_error(get_chunk(relay, bob, gone, 0), 404, "no_such_chunk")
    assert get_chunk(relay, bob, kept, 0).body == SMALL
