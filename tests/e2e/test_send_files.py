"""`talk send --file` on a real relay: the files are sealed and uploaded, then one message
announces them. The relay holds only ciphertext, which opens to the file with the key the
message carries; a kill of the sender and of the relay mid-upload, then the command run
again, resumes where the relay stopped and announces once; the sender's memory stays flat."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import random
import signal
import sqlite3
from pathlib import Path

import pytest

from follower.send.transfer import Transfer
from keys.filestream import CHUNK_BYTES, Opener, chunk_count
from tests.conftest import Agent, RelayProcess, befriend, make_agent, wait_for
from tests.e2e.file_transfers import (
    MB,
    Sampled,
    chunks_taken,
    file_next,
    fingerprint,
    killed_holding,
    killed_mid_upload,
    mail_waiting,
    metered_pair,
    metered_relay,
    pending,
    write_random,
)


def relay_file_digest(relay: RelayProcess, fp: str, transfer: Transfer) -> str:
    """The sha256 of what the relay's chunks of the transfer's first file open to."""
    part = transfer.files[0]
    opener, digest = Opener(part.key, part.header), hashlib.sha256()
    with contextlib.closing(sqlite3.connect(relay.db)) as db:
        rows = db.execute("SELECT idx, blob FROM chunks WHERE fp = ? AND file = ? ORDER BY idx",
                          (fp, part.id))
        for index, blob in rows:
            digest.update(opener.open(blob, index == part.chunks - 1))
    return digest.hexdigest()


@pytest.mark.own_relay
def test_a_file_is_uploaded_sealed_and_announced_once(tmp_path: Path, relay: RelayProcess,
                                                      pair: tuple[Agent, Agent]) -> None:
    alice, bob = pair
    bob_fp = fingerprint(bob)
    src = tmp_path / "build.log"
    src.write_bytes(random.Random(5).randbytes(3 * CHUNK_BYTES + 7))
    before = mail_waiting(relay, bob_fp)
    sent = alice.ok("send", "bob", "--file", str(src), "--json").json()
    assert sent["state"] == "stored" and sent["to"] == "bob"
    assert mail_waiting(relay, bob_fp) == before + 1
    assert pending(alice) == []  # the record, and the key in it, are gone once announced
    with contextlib.closing(sqlite3.connect(relay.db)) as db:
        rows = db.execute("SELECT blob FROM chunks WHERE fp = ?", (bob_fp,)).fetchall()
    assert len(rows) == chunk_count(src.stat().st_size)
    plain = src.read_bytes()
    assert not any(plain[:64] in blob or plain[-64:] in blob for (blob,) in rows)  # ciphertext only


def test_a_path_that_is_no_regular_file_is_refused(tmp_path: Path, pair: tuple[Agent, Agent]) -> None:
    alice, _ = pair
    for path in (str(tmp_path), "/dev/zero", str(tmp_path / "missing")):
        r = alice.run("send", "bob", "--file", path)
        assert r.code == 1 and path in r.err and "Traceback" not in r.err, r.err
    assert pending(alice) == []


def test_nothing_to_send_is_refused(pair: tuple[Agent, Agent]) -> None:
    alice, _ = pair
    r = alice.run("send", "bob")
    assert r.code == 1 and "--file" in r.err


def test_a_200_mb_upload_killed_with_its_relay_resumes_and_is_announced_once(tmp_path: Path) -> None:
    size = 200 * MB
    with metered_relay(tmp_path) as (relay, metrics):
        alice, bob = make_agent(tmp_path, relay, "alice", None), make_agent(tmp_path, relay, "bob", None)
        befriend(alice, bob)
        bob_fp = fingerprint(bob)
        src = tmp_path / "dataset.bin"
        sha = write_random(src, size, seed=29)
        before = mail_waiting(relay, bob_fp)

        first, transfer = killed_holding(alice, relay, bob_fp, 40, "the dataset", "--file", str(src),
                                         "--json")
        file_id = transfer.files[0].id
        relay.stop(signal.SIGKILL)
        relay.start()

        held = file_next(relay, bob_fp, file_id)
        assert held >= 40
        # The outbox and the status show the transfer, and how far it got, before its message exists.
        rows = [r for r in alice.ok("outbox", "--offline", "--json").json() if r["id"] == transfer.id]
        assert [(r["state"], r["files"], r["bytes"]) for r in rows] == [("uploading", ["dataset.bin"], size)]
        assert 0 < rows[0]["bytes_sent"] <= held * CHUNK_BYTES
        assert [u["id"] for u in alice.ok("status", "--json").json()["uploads"]] == [transfer.id]
        assert "uploading" in alice.ok("outbox", "--offline").out
        assert mail_waiting(relay, bob_fp) == before  # nothing announced yet
        again = Sampled(alice, "send", "bob", "the dataset", "--file", str(src), "--json")
        code, out, err = again.wait()
        assert code == 0, err
        report = json.loads(out)
        assert report == {"id": transfer.id, "to": "bob", "state": "stored"}  # the id fixed at the start

        chunks = chunk_count(size)
        assert chunks_taken(metrics) == chunks - held  # resumed where the relay stopped, not from 0
        assert mail_waiting(relay, bob_fp) == before + 1  # exactly one announce
        assert relay_file_digest(relay, bob_fp, transfer) == sha
        assert pending(alice) == []
        for run in (first, again):
            assert run.peak_kb < 100 * 1024, f"the sender's RSS peaked at {run.peak_kb} KiB"
        os.unlink(src)


def test_the_follower_finishes_an_upload_whose_command_died(tmp_path: Path) -> None:
    with metered_pair(tmp_path) as (relay, alice, bob_fp):
        src = tmp_path / "trace.bin"
        sha = write_random(src, 40 * MB, seed=3)
        before = mail_waiting(relay, bob_fp)
        transfer = killed_mid_upload(alice, relay, bob_fp, src)
        assert [t.id for t in pending(alice)] == [transfer.id]  # left unfinished
        pid = alice.ok("follow", "--json").json()["pid"]
        try:
            wait_for(lambda: not pending(alice) or None, 60, "the follower to finish the upload")
            wait_for(lambda: mail_waiting(relay, bob_fp) == before + 1 or None, 30, "the announce")
        finally:
            os.kill(pid, signal.SIGTERM)
        assert relay_file_digest(relay, bob_fp, transfer) == sha
