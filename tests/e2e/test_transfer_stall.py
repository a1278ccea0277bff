"""Transfers that cannot go on, on a real relay: a source deleted after its sender died, a file
over the relay's limit. The follower stalls each with its reason and what to do, logs it once and
does not retry it until the file changes; `talk outbox --cancel` erases an unsent transfer and
its keys, and refuses what it cannot cancel with one line and exit status 1."""

from __future__ import annotations

import base64
import json
import os
import random
import signal
from pathlib import Path

from durable.locks import locked
from follower.send.transfer import Transfer, TransferBook
from follower.send.upload import begin
from keys.contacts import ContactBook
from keys.filestream import CHUNK_BYTES
from tests.conftest import Agent, RelayProcess, befriend, free_port, make_agent, wait_for
from tests.e2e.file_transfers import (
    MB,
    killed_mid_upload,
    mail_waiting,
    metered_pair,
    pending,
    write_random,
)


def folder(agent: Agent) -> Path:
    return agent.home / "alice"


def recorded(agent: Agent, src: Path, text: str = "") -> Transfer:
    """A transfer recorded as `talk send --file` records it before its upload: one left to the
    follower, as if its command died at once."""
    bob = ContactBook(folder(agent)).get("bob")
    transfer, new = begin(TransferBook(folder(agent)), bob, [str(src)], text)
    assert new
    return transfer


def uploads(agent: Agent) -> dict[str, dict[str, object]]:
    return {row["id"]: row for row in agent.ok("status", "--json").json()["uploads"]}


def stalled(agent: Agent, transfer_id: str) -> dict[str, object] | None:
    """The transfer's row in `talk status --json` once it shows stalled."""
    row = uploads(agent).get(transfer_id)
    return row if row is not None and row["state"] == "stalled" else None


def outbox_row(agent: Agent, transfer_id: str) -> dict[str, object] | None:
    return next((r for r in agent.ok("outbox", "--offline", "--json").json() if r["id"] == transfer_id), None)


def attempts_logged(agent: Agent, transfer_id: str) -> list[str]:
    log = folder(agent) / "follower.log"
    text = log.read_text() if log.exists() else ""
    return [line for line in text.splitlines() if f"transfer {transfer_id}" in line]


def later_rounds(agent: Agent, tmp_path: Path) -> None:
    """Another transfer left to the follower, recorded now; once it is finished, the follower has
    had rounds since (no sleep: the proof is the upload it did)."""
    other = tmp_path / "small.txt"
    other.write_text("a small file")
    second = recorded(agent, other)
    wait_for(lambda: second.id not in {t.id for t in pending(agent)} or None, 60, "the later upload")


def test_a_deleted_source_stalls_once_and_goes_on_when_the_file_is_back(tmp_path: Path) -> None:
    with metered_pair(tmp_path) as (relay, alice, bob_fp):
        src = tmp_path / "trace.bin"
        write_random(src, 40 * MB, seed=7)
        kept = src.read_bytes()
        transfer = killed_mid_upload(alice, relay, bob_fp, src)
        src.unlink()
        before = mail_waiting(relay, bob_fp)
        pid = alice.ok("follow", "--json").json()["pid"]
        try:
            row = wait_for(lambda: stalled(alice, transfer.id), 60, "the follower to stall the transfer")
            assert str(src) in str(row["reason"]) and "--cancel" in str(row["hint"])
            assert "put the file back" in str(row["hint"])
            shown = outbox_row(alice, transfer.id)
            assert shown is not None and shown["state"] == "stalled" and shown["reason"] == row["reason"]
            assert "stalled" in alice.ok("outbox", "--offline").out

            later_rounds(alice, tmp_path)
            lines = attempts_logged(alice, transfer.id)
            assert len(lines) == 1 and "stalled" in lines[0], lines
            assert uploads(alice)[transfer.id]["state"] == "stalled"

            src.write_bytes(kept)  # the file is back: the upload goes on, by itself
            wait_for(lambda: not pending(alice) or None, 60, "the follower to finish the upload")
            wait_for(lambda: mail_waiting(relay, bob_fp) >= before + 2 or None, 30, "both announces")
        finally:
            os.kill(pid, signal.SIGTERM)


def test_a_file_over_the_relay_limit_stalls_with_the_relay_reason(tmp_path: Path) -> None:
    relay = RelayProcess(tmp_path / "relay" / "relay.db", free_port(), extra=["--max-file-bytes", str(MB)])
    relay.start()
    try:
        alice, bob = make_agent(tmp_path, relay, "alice", None), make_agent(tmp_path, relay, "bob", None)
        befriend(alice, bob)
        src = tmp_path / "big.bin"
        src.write_bytes(random.Random(2).randbytes(5 * CHUNK_BYTES))  # 1.25 MiB
        transfer = recorded(alice, src, "the big one")
        pid = alice.ok("follow", "--json").json()["pid"]
        try:
            row = wait_for(lambda: stalled(alice, transfer.id), 60, "the follower to stall the transfer")
            later_rounds(alice, tmp_path)
        finally:
            os.kill(pid, signal.SIGTERM)
        assert "at most 1 MiB" in str(row["reason"]) and "smaller" in str(row["hint"])
        assert len(attempts_logged(alice, transfer.id)) == 1  # not tried in the rounds since
        # The command run again tries once more (the stall does not hide the refusal from it).
        r = alice.run("send", "bob", "the big one", "--file", str(src))
        assert r.code == 3 and "at most" in r.err and "Traceback" not in r.err
        assert len(r.err.strip().splitlines()) == 1, r.err
        assert uploads(alice)[transfer.id]["state"] == "stalled"
    finally:
        relay.stop()


def traces(home: Path, secret: bytes) -> list[Path]:
    forms = (secret, base64.b64encode(secret), base64.urlsafe_b64encode(secret).rstrip(b"="),
             secret.hex().encode())
    return [p for p in home.rglob("*") if p.is_file() and any(f in p.read_bytes() for f in forms)]


def test_cancel_erases_the_record_and_its_keys(tmp_path: Path, pair: tuple[Agent, Agent]) -> None:
    alice, _ = pair
    src = tmp_path / "notes.txt"
    src.write_text("not to be sent after all")
    transfer = recorded(alice, src, "x" * 40_000)  # with a long text: a body part, its words on disk
    assert transfer.body is not None
    keys = [p.key for p in transfer.parts]
    assert all(traces(alice.home, key) for key in keys)  # they are there, as the check sees them
    out = alice.ok("outbox", "--cancel", transfer.id[:8], "--json").json()
    assert out == {"id": transfer.id, "to": "bob", "state": "cancelled", "bytes_sent": 0}
    assert pending(alice) == [] and outbox_row(alice, transfer.id) is None
    assert not any(traces(alice.home, key) for key in keys)
    assert not list((folder(alice) / "transfers").glob(f"{transfer.id}*"))
    again = alice.run("outbox", "--cancel", transfer.id)
    assert again.code == 1 and "no transfer or sent message" in again.err


def test_cancel_refuses_what_it_cannot_cancel(tmp_path: Path, pair: tuple[Agent, Agent]) -> None:
    alice, _ = pair
    book = TransferBook(folder(alice))
    src = tmp_path / "a.txt"
    src.write_text("hello")
    made = recorded(alice, src)
    for suffix in ("00", "11"):  # two transfers whose ids begin alike
        book.save(made._replace(id="abcdef" + suffix + made.id[8:], key=suffix))
    sent = alice.ok("send", "bob", "already gone", "--json").json()["id"]

    def refused(typed: str, words: str) -> None:
        r = alice.run("outbox", "--cancel", typed)
        assert r.code == 1 and words in r.err and len(r.err.strip().splitlines()) == 1, r.err
        assert "Traceback" not in r.err

    refused("abcdef", "ambiguous")
    refused("0" * 32 if not made.id.startswith("0") else "f" * 32, "no transfer or sent message")
    refused("not-an-id", "is not a message id")
    refused(sent[:10], "already went")
    with locked(book.lock_path(made.id)):  # an upload holds it now
        refused(made.id, "uploading now")
    assert made.id in {t.id for t in book.pending()}  # refused, untouched
    assert json.loads(alice.ok("outbox", "--cancel", made.id[:6], "--json").out)["state"] == "cancelled"
