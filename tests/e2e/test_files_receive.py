"""Receiving files on a real relay: every file a peer announces lands whole under a safe name in
the downloads folder, or not at all, its message quarantined with the reason; a follower killed
mid-download resumes, hands the message on once, and keeps its memory flat.

The sending side here is a peer's own: chunks sealed with `keys.filestream` and put on the relay
with the client, then an announce sealed as any contact seals an envelope (`tests.peer_forge`),
so each test can hand the receiver exactly the bytes a hostile sender would."""

from __future__ import annotations

import hashlib
import os
import secrets
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from durable.errors import RelayError
from follower.files.parked import Parked
from follower.receive.quarantine import Quarantine
from follower.relay.client import RelayClient
from keys.contacts import Contact
from keys.envelope import channel_tag
from keys.fileref import FileRef
from keys.filestream import CHUNK_BYTES, Sealer, chunk_count
from keys.identity import Identity
from keys.sodium import PublicKey
from tests.conftest import Agent, RelayProcess, befriend, make_agent, wait_for
from tests.e2e.file_downloads import (
    RssSampler,
    downloads,
    kill_follower,
    killed_mid_download,
    no_partial_left,
    progress_chunk,
    sha256_of,
    traces_of,
)
from tests.peer_forge import contact_of, deposit_raw, envelope, identity_of, spool_records


def upload(url: str, sender: Identity, to: Contact, size: int, name: str = "data.bin",
           block: Callable[[int], bytes] = os.urandom, tamper: Callable[[int, bytes], bytes] | None = None,
           ) -> tuple[FileRef, str]:
    """Seal and put a file of `size` bytes (made by `block`, a chunk at a time: never all in
    memory); its ref and sha256. `tamper(i, sealed)` changes chunk i on the way."""
    key, file_id = os.urandom(32), secrets.token_hex(16)
    sealer, digest = Sealer(key), hashlib.sha256()
    tag = channel_tag(sender.box_secret, PublicKey(to.box_key), to.fingerprint)
    count = chunk_count(size)
    with RelayClient(url) as client:
        for i in range(count):
            plain = block(min(CHUNK_BYTES, size - i * CHUNK_BYTES))
            digest.update(plain)
            sealed = sealer.seal(plain, last=i == count - 1)
            put(client, to.fingerprint, tag, file_id, i, tamper(i, sealed) if tamper else sealed)
    return FileRef(file_id, name, size, digest.hexdigest(), key, sealer.header), digest.hexdigest()


def put(client: RelayClient, fp: str, tag: str, file_id: str, index: int, blob: bytes) -> None:
    """Put one chunk, waiting out the relay's chunk rate (shared by every test on this address)."""

    def taken() -> bool:
        try:
            client.put_chunk(fp, tag, file_id, index, blob)
        except RelayError as exc:
            if exc.status != 429:
                raise
            return False
        return True

    wait_for(taken, 30, f"the relay to take chunk {index}", step=0.1)


def announce(url: str, sender: Identity, to: Contact, refs: list[FileRef], text: str = "see attached",
             **more: Any) -> str:
    data = envelope(sender, to, text=text, files=[r.to_json() for r in refs], **more)
    deposit_raw(url, sender, to, data)
    return str(data["id"])


def test_a_file_arrives_whole_with_its_path_size_and_hash(duo: tuple[Agent, Agent, Identity],
                                                          relay: RelayProcess) -> None:
    alice, bob, forger = duo
    to_bob = contact_of(alice.home, "alice", "bob")
    ref, digest = upload(relay.url, forger, to_bob, 3 * CHUNK_BYTES + 11, "report.txt")
    msg_id = announce(relay.url, forger, to_bob, [ref])
    (line,) = bob.ok("receive").lines()
    assert line["id"] == msg_id and line["text"] == "see attached"
    (entry,) = line["files"]
    path = Path(entry["path"])
    assert path == bob.home / "bob" / "downloads" / "report.txt"
    assert (entry["size"], entry["sha256"], sha256_of(path)) == (ref.size, digest, digest)
    assert no_partial_left(bob)
    shown = bob.ok("show", "alice", "--json").json()
    assert shown[-1]["files"] == [{"path": str(path), "size": ref.size, "sha256": digest}]
    assert shown[-1]["name"] == "alice"
    # A stolen folder opens nothing: no trace of the key is left in it, and the relay forgot the chunks.
    assert not traces_of(ref, bob)
    with RelayClient(relay.url) as client:
        assert client.file_next(to_bob.fingerprint, ref.id) == 0


def test_an_announce_sealed_in_the_ratchet_with_a_long_body_arrives_once(
    duo: tuple[Agent, Agent, Identity], relay: RelayProcess, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Through the library's own send path (sealed in the pair's Olm session): a file and a text
    too long for one envelope, whose body becomes the message's text and no download."""
    from talk.context import open_account

    alice, bob, forger = duo
    alice.ok("send", "bob", "hello first")  # a session between them
    bob.ok("receive")
    monkeypatch.setenv("TALK_HOME", str(alice.home))
    monkeypatch.setenv("TALK_RELAY", relay.url)
    account = open_account(None, None, None)
    to_bob = contact_of(alice.home, "alice", "bob")
    text = ("a line of a long report, " * 4000 + "\n") * 6  # about 600 KB
    encoded = iter([text.encode()[i:i + CHUNK_BYTES] for i in range(0, len(text.encode()), CHUNK_BYTES)])
    body, _ = upload(relay.url, forger, to_bob, len(text.encode()), block=lambda n: next(encoded))
    ref, digest = upload(relay.url, forger, to_bob, 1000, "patch.diff")
    from follower.send import outbound

    with account.client:
        msg_id = outbound.send(account.identity(), account.client, account.contacts.get("bob"), "",
                               outbox=account.outbox, files=[ref.to_json()],
                               body=body._replace(name=None).to_json()).id
    (line,) = bob.ok("receive").lines()
    assert line["id"] == msg_id and line["text"] == text
    assert [(Path(f["path"]).name, f["sha256"]) for f in line["files"]] == [("patch.diff", digest)]
    assert len(downloads(bob)) == 1
    assert bob.ok("receive").lines() == []  # once


@pytest.mark.parametrize(("wish", "landed"), [
    ("../../.profile", "_.._.profile"), ("/etc/passwd", "_etc_passwd"), ("CON", "_CON"),
    ("nul.txt", "_nul.txt"), (".bashrc", "bashrc"), ("a\u202etxt.exe", "atxt.exe"), ("..", "file"),
])
def test_a_peer_chosen_name_lands_safely_in_downloads(duo: tuple[Agent, Agent, Identity], relay: RelayProcess,
                                                      wish: str, landed: str) -> None:
    alice, bob, forger = duo
    to_bob = contact_of(alice.home, "alice", "bob")
    ref, _ = upload(relay.url, forger, to_bob, 10, wish)
    announce(relay.url, forger, to_bob, [ref])
    (line,) = bob.ok("receive").lines()
    assert [p.name for p in downloads(bob)] == [landed]
    assert Path(line["files"][0]["path"]).parent == bob.home / "bob" / "downloads"


def test_a_symlink_planted_in_downloads_is_never_followed(duo: tuple[Agent, Agent, Identity],
                                                          relay: RelayProcess, tmp_path: Path) -> None:
    alice, bob, forger = duo
    to_bob = contact_of(alice.home, "alice", "bob")
    folder = bob.home / "bob" / "downloads"
    folder.mkdir(mode=0o700)
    victim = tmp_path / "victim"
    victim.write_text("precious")
    (folder / "notes.txt").symlink_to(victim)
    ref, digest = upload(relay.url, forger, to_bob, 100, "notes.txt")
    announce(relay.url, forger, to_bob, [ref])
    (line,) = bob.ok("receive").lines()
    assert Path(line["files"][0]["path"]).name == "notes (2).txt"
    assert sha256_of(Path(line["files"][0]["path"])) == digest and victim.read_text() == "precious"


def refused_reason(bob: Agent, msg_id: str) -> str:
    (entry,) = [e for e in Quarantine(bob.home / "bob").entries() if e["id"] == msg_id]
    return str(entry["reason"])


def flip(i: int, sealed: bytes) -> bytes:
    return sealed[:40] + bytes([sealed[40] ^ 1]) + sealed[41:] if i == 1 else sealed


@pytest.mark.parametrize(("case", "reason"), [
    ("tampered", "chunk 1 of 3: a file chunk does not open"),
    ("wrong hash", "do not hash to the sha256"),
    ("truncated", "ends before its last chunk"),
    ("longer", "more bytes than announced"),
    ("over the limit", "over this side's limit"),
    ("missing", "not on the relay"),
])
def test_a_bad_file_is_quarantined_with_its_reason_and_the_rest_flows(
    duo: tuple[Agent, Agent, Identity], relay: RelayProcess, case: str, reason: str
) -> None:
    alice, bob, forger = duo
    to_bob = contact_of(alice.home, "alice", "bob")
    size = 3 * CHUNK_BYTES - 5
    ref, _ = upload(relay.url, forger, to_bob, size, "x.bin", tamper=flip if case == "tampered" else None)
    announced = {"wrong hash": ref._replace(sha256="0" * 64), "longer": ref._replace(size=size - 3),
                 "truncated": ref._replace(size=size + CHUNK_BYTES),
                 "missing": ref._replace(id=secrets.token_hex(16))}
    if case == "over the limit":
        bob.extra_env["TALK_MAX_FILE_BYTES"] = str(size - 1)
    msg_id = announce(relay.url, forger, to_bob, [announced.get(case, ref)])
    alice.ok("send", "bob", "after it")
    r = bob.ok("receive")
    assert [m["text"] for m in r.lines()] == ["after it"]
    assert reason in refused_reason(bob, msg_id) and "quarantined" in r.err
    assert downloads(bob) == [] and no_partial_left(bob)


def test_a_big_download_does_not_hold_up_other_mail(tmp_path: Path, relay: RelayProcess) -> None:
    """A message whose file cannot be placed yet stays parked; other contacts' mail flows past it."""
    alice, bob, carol = (make_agent(tmp_path, relay, n, None) for n in ("alice", "bob", "carol"))
    befriend(alice, bob)
    befriend(carol, bob)
    sender = identity_of(alice.home, "alice")
    to_bob = contact_of(alice.home, "alice", "bob")
    (bob.home / "bob" / "downloads").symlink_to(tmp_path)  # refused as a place: the file waits
    ref, digest = upload(relay.url, sender, to_bob, 2 * CHUNK_BYTES, "big.bin")
    bob.ok("follow")
    try:
        msg_id = announce(relay.url, sender, to_bob, [ref])
        wait_for(lambda: Parked(bob.home / "bob").ids() == {msg_id}, 20, "the announce parked")
        carol.ok("send", "bob", "small and quick")
        spooled = wait_for(lambda: spool_records(bob, "bob"), 20, "carol's message in the spool")
        assert [r["text"] for r in spooled] == ["small and quick"]
        assert Parked(bob.home / "bob").ids() == {msg_id}  # still waiting for its place
        assert bob.ok("status", "--json").json()["downloading"] == 1
        (bob.home / "bob" / "downloads").unlink()
        line = wait_for(lambda: [r for r in spool_records(bob, "bob") if r["id"] == msg_id], 30,
                        "alice's message, once its file is in")[0]
        wait_for(lambda: no_partial_left(bob), 30, "the parked record erased")
        assert sha256_of(Path(str(line["files"][0]["path"]))) == digest
    finally:
        bob.run("stop")


def test_a_200_mb_file_survives_a_killed_follower_arrives_once_with_flat_memory(
    duo: tuple[Agent, Agent, Identity], relay: RelayProcess
) -> None:
    alice, bob, forger = duo
    to_bob = contact_of(alice.home, "alice", "bob")
    folder = bob.home / "bob"
    size = 200 * 1024 * 1024
    ref, digest = upload(relay.url, forger, to_bob, size, "big.bin")
    sampler = RssSampler(folder)
    sampler.start()
    bob.ok("follow", "--peer", "alice")
    try:
        msg_id = announce(relay.url, forger, to_bob, [ref])
        lines = killed_mid_download(bob, msg_id, ref.id)
    finally:
        bob.run("stop")
        sampler.done.set()
        sampler.join()
    (line,) = lines
    assert line["id"] == msg_id and len(downloads(bob)) == 1
    assert sha256_of(Path(str(line["files"][0]["path"]))) == digest
    assert not traces_of(ref, bob)
    print(f"follower RSS peak {sampler.peak} kB over {sampler.samples} samples")
    assert sampler.samples > 0 and sampler.peak < 100 * 1024, f"follower RSS peaked at {sampler.peak} kB"


@pytest.mark.own_relay
def test_a_download_goes_on_after_the_relay_is_killed_mid_way(duo: tuple[Agent, Agent, Identity],
                                                              relay: RelayProcess) -> None:
    alice, bob, forger = duo
    to_bob = contact_of(alice.home, "alice", "bob")
    folder = bob.home / "bob"
    ref, digest = upload(relay.url, forger, to_bob, 120 * 1024 * 1024, "data.bin")
    bob.ok("follow", "--peer", "alice")
    try:
        msg_id = announce(relay.url, forger, to_bob, [ref])
        wait_for(lambda: progress_chunk(folder, msg_id, ref.id) > 0, 120, "the download under way")
        relay.stop(signal.SIGKILL)
        relay.start()
        lines = wait_for(lambda: spool_records(bob, "bob"), 300, "the message, its file in")
        wait_for(lambda: no_partial_left(bob), 60, "the parked record erased")
    finally:
        bob.run("stop")
    (line,) = lines
    assert line["id"] == msg_id and sha256_of(Path(str(line["files"][0]["path"]))) == digest


def test_talk_send_file_to_a_follower_and_a_long_text_to_talk_receive(
    duo: tuple[Agent, Agent, Identity], tmp_path: Path
) -> None:
    """The whole way, by the commands: `talk send --file` to a following bob, whose agent frame
    names the file; then a text too long for one envelope, taken by `talk receive`."""
    alice, bob, _ = duo
    path = tmp_path / "build log.txt"
    path.write_bytes(os.urandom(CHUNK_BYTES + 99))
    digest = sha256_of(path)
    bob.ok("follow", "--peer", "alice")
    try:
        alice.ok("send", "bob", "the log", "--file", str(path))
        line = wait_for(lambda: spool_records(bob, "bob"), 60, "the message, its file in")[0]
        wait_for(lambda: no_partial_left(bob), 30, "the parked record erased")
    finally:
        bob.run("stop")
    (entry,) = line["files"]
    assert (line["text"], entry["name"], entry["sha256"], sha256_of(Path(str(entry["path"])))) == (
        "the log", "build log.txt", digest, digest)
    from alarms.framing import frame

    told = f"FILE from alice saved by talk at {entry['path']} ({path.stat().st_size} bytes, sha256 {digest})"
    assert told in frame([line])
    long_text = "word " * 40_000
    alice.ok("send", "bob", "-", stdin=long_text)
    (got,) = bob.ok("receive").lines()
    assert got["text"] == long_text


def test_a_refused_senders_files_are_dropped_at_the_relay_at_once(duo: tuple[Agent, Agent, Identity],
                                                                  relay: RelayProcess) -> None:
    alice, bob, forger = duo
    to_bob = contact_of(alice.home, "alice", "bob")
    bob.ok("policy", "alice", "refuse", "--yes")
    ref, _ = upload(relay.url, forger, to_bob, 2 * CHUNK_BYTES, "unwanted.bin")
    with RelayClient(relay.url) as client:
        assert client.file_next(to_bob.fingerprint, ref.id) == 2
    announce(relay.url, forger, to_bob, [ref])
    assert bob.ok("receive").lines() == []
    with RelayClient(relay.url) as client:
        assert client.file_next(to_bob.fingerprint, ref.id) == 0  # its quota is free again
    assert downloads(bob) == [] and no_partial_left(bob)


def test_the_sender_of_a_refused_file_is_told_why(duo: tuple[Agent, Agent, Identity],
                                                  relay: RelayProcess) -> None:
    from follower.send.outbox import Outbox

    alice, bob, forger = duo
    to_bob = contact_of(alice.home, "alice", "bob")
    ref, _ = upload(relay.url, forger, to_bob, 5000, "x.bin")
    data = envelope(forger, to_bob, text="see", files=[ref._replace(sha256="1" * 64).to_json()])
    # Kept in alice's outbox as her own message, so the receipt for it lands somewhere.
    Outbox(alice.home / "alice").sent(data["id"], to_bob.fingerprint, "bob", "chat", "see", "t", "")
    deposit_raw(relay.url, forger, to_bob, data)
    bob.ok("receive")

    def refused() -> bool:
        alice.ok("receive")
        return bool(alice.ok("status", data["id"], "--json").json()["state"] == "refused")

    wait_for(refused, 15, "a refused receipt at alice")
    assert "sha256" in alice.ok("status", data["id"], "--json").json()["reason"]


def test_talk_receive_cut_short_in_a_download_says_so_and_goes_on_next_time(
    duo: tuple[Agent, Agent, Identity], relay: RelayProcess, tmp_path: Path
) -> None:
    alice, bob, forger = duo
    to_bob = contact_of(alice.home, "alice", "bob")
    (bob.home / "bob" / "downloads").symlink_to(tmp_path)  # no place for it yet
    ref, digest = upload(relay.url, forger, to_bob, CHUNK_BYTES + 1, "later.bin")
    msg_id = announce(relay.url, forger, to_bob, [ref])
    alice.ok("send", "bob", "meanwhile")  # after the file: it waits behind it
    first = bob.ok("receive")
    assert first.lines() == [] and "still on their way" in first.err
    (bob.home / "bob" / "downloads").unlink()
    line, after = bob.ok("receive").lines()
    assert line["id"] == msg_id and sha256_of(Path(str(line["files"][0]["path"]))) == digest
    assert after["text"] == "meanwhile" and bob.ok("receive").lines() == []
    assert not list(tmp_path.glob("later*"))


def stall(agent: Agent, ref: FileRef) -> Path:
    """Stop `ref`'s download where it starts: a folder where its partial file goes (the taker
    tries again until it is gone); the path to remove to let it go on."""
    parked = Parked(agent.home / "bob")
    parked.ensure()
    blocker = parked.partial_path(ref)
    blocker.mkdir()
    return blocker


@pytest.mark.parametrize("killed", [False, True])
def test_a_senders_later_mail_waits_behind_its_file_message_and_no_one_elses(
    tmp_path: Path, relay: RelayProcess, killed: bool
) -> None:
    """alice's file message, then her text: the agent sees them in that order, never the text
    first, even across a follower killed while the text waits; carol's mail meanwhile flows."""
    alice, bob, carol = (make_agent(tmp_path, relay, n, None) for n in ("alice", "bob", "carol"))
    befriend(alice, bob)
    befriend(carol, bob)
    to_bob = contact_of(alice.home, "alice", "bob")
    folder = bob.home / "bob"
    ref, digest = upload(relay.url, identity_of(alice.home, "alice"), to_bob, 2 * CHUNK_BYTES, "first.bin")
    blocker = stall(bob, ref)
    bob.ok("follow")
    try:
        file_id = announce(relay.url, identity_of(alice.home, "alice"), to_bob, [ref], text="the file")
        wait_for(lambda: Parked(folder).ids() == {file_id}, 20, "the file message parked")
        alice.ok("send", "bob", "after the file")
        wait_for(lambda: len(Parked(folder).ids()) == 2, 20, "alice's text parked behind it")
        carol.ok("send", "bob", "from carol")
        wait_for(lambda: spool_records(bob, "bob"), 20, "carol's message in the spool")
        assert [r["text"] for r in spool_records(bob, "bob")] == ["from carol"]
        assert bob.ok("status", "--json").json()["downloading"] == 1
        if killed:
            kill_follower(folder)
            bob.ok("follow")
        blocker.rmdir()
        wait_for(lambda: len(spool_records(bob, "bob")) >= 3 and no_partial_left(bob), 60,
                 "alice's two messages handed on")
    finally:
        bob.run("stop")
    lines = spool_records(bob, "bob")
    assert [r["text"] for r in lines] == ["from carol", "the file", "after the file"]
    assert lines[1]["id"] == file_id and sha256_of(Path(str(lines[1]["files"][0]["path"]))) == digest
    assert "files" not in lines[2]


def test_mail_behind_a_file_that_fails_goes_on_once_it_is_quarantined(
    duo: tuple[Agent, Agent, Identity], relay: RelayProcess
) -> None:
    alice, bob, forger = duo
    to_bob = contact_of(alice.home, "alice", "bob")
    folder = bob.home / "bob"
    ref, _ = upload(relay.url, forger, to_bob, 2 * CHUNK_BYTES, "bad.bin")
    wrong = ref._replace(sha256="0" * 64)
    blocker = stall(bob, wrong)
    bob.ok("follow", "--peer", "alice")
    try:
        msg_id = announce(relay.url, forger, to_bob, [wrong], text="the file")
        wait_for(lambda: Parked(folder).ids() == {msg_id}, 20, "the file message parked")
        alice.ok("send", "bob", "after the file")
        wait_for(lambda: len(Parked(folder).ids()) == 2, 20, "alice's text parked behind it")
        assert not spool_records(bob, "bob")
        blocker.rmdir()
        lines = wait_for(lambda: spool_records(bob, "bob"), 60, "alice's text, once the file is refused")
        wait_for(lambda: no_partial_left(bob), 30, "nothing left parked")
    finally:
        bob.run("stop")
    assert [r["text"] for r in lines] == ["after the file"]
    assert "sha256" in refused_reason(bob, msg_id) and downloads(bob) == []
