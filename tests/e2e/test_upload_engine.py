"""follower.send.upload against a real relay: a resumed upload seals on from its saved state and
puts only what the relay lacks; the record never runs ahead of the relay; a relay that lost the
chunks, or a file changed since it was hashed, makes the part start over under a new id and key."""

from __future__ import annotations

import random
import secrets
import threading
from pathlib import Path
from typing import Any

import pytest

from durable.errors import RelayError
from follower.relay.client import RelayClient
from follower.send.transfer import SAVE_EVERY, Part, Transfer, TransferBook, command_key
from follower.send.upload import _new_part, _still_same, begin, file_digest, upload
from keys.contacts import Contact, Source, pinned_contact
from keys.filestream import CHUNK_BYTES, Opener
from keys.identity import Identity
from tests.conftest import RelayProcess


class Interrupted(Exception):
    """The stand-in for a kill: the client stops answering after a number of puts."""


class Counting:
    """A real client that counts the chunks put, and fails the put after `stop_after` of them."""

    def __init__(self, client: RelayClient, stop_after: int | None = None) -> None:
        self.client = client
        self.puts: list[int] = []
        self.stop_after = stop_after

    def put_chunk(self, fp: str, tag: str, file_id: str, index: int, blob: bytes) -> None:
        if self.stop_after is not None and len(self.puts) >= self.stop_after:
            raise Interrupted
        self.client.put_chunk(fp, tag, file_id, index, blob)
        self.puts.append(index)

    def file_next(self, fp: str, file_id: str) -> int:
        return self.client.file_next(fp, file_id)


@pytest.fixture
def setting(relay: RelayProcess, tmp_path: Path) -> Any:
    owner, tag = Identity.generate("bob"), secrets.token_hex(16)
    client = RelayClient(relay.url)
    client.publish(owner.bundle())
    client.fetch(owner, [tag])  # registered, as a contact's channel is
    src = tmp_path / "data.bin"
    src.write_bytes(random.Random(1).randbytes(5 * SAVE_EVERY * CHUNK_BYTES // 2 + 99))
    yield owner, tag, client, src
    client.close()


def opened(client: RelayClient, owner: Identity, part: Part) -> bytes:
    opener = Opener(part.key, part.header)
    return b"".join(opener.open(client.get_chunk(owner, part.id, i), i == part.chunks - 1)
                    for i in range(part.chunks))


def test_a_resumed_upload_puts_only_what_the_relay_lacks(setting: Any) -> None:
    owner, tag, client, src = setting
    part = _new_part(str(src), "data.bin", *file_digest(str(src)))
    saved: list[Part] = []
    killed = Counting(client, stop_after=SAVE_EVERY + 3)
    with pytest.raises(Interrupted):
        upload(killed, owner.fingerprint, tag, part, saved.append, lambda _: None)
    assert [p.next for p in saved] == [SAVE_EVERY]  # the record stops at the last save
    held = client.file_next(owner.fingerprint, part.id)
    assert held == SAVE_EVERY + 3
    again = Counting(client)
    done = upload(again, owner.fingerprint, tag, saved[-1], saved.append, lambda _: None)
    assert again.puts == list(range(held, part.chunks))  # sealed on from the state; nothing re-sent
    assert done.done and done.id == part.id
    assert opened(client, owner, done) == src.read_bytes()


def test_the_record_never_runs_ahead_of_the_relay(setting: Any) -> None:
    owner, tag, client, src = setting
    part = _new_part(str(src), "data.bin", *file_digest(str(src)))

    def save(saved: Part) -> None:
        assert client.file_next(owner.fingerprint, saved.id) >= saved.next

    sent: list[int] = []
    upload(client, owner.fingerprint, tag, part, save, sent.append)
    assert sent[-1] == part.size and sent == sorted(sent)


def test_chunks_the_relay_lost_make_the_part_start_over_under_a_new_key(setting: Any) -> None:
    owner, tag, client, src = setting
    part = _new_part(str(src), "data.bin", *file_digest(str(src)))
    saved: list[Part] = []
    with pytest.raises(Interrupted):
        upload(Counting(client, stop_after=SAVE_EVERY + 1), owner.fingerprint, tag, part,
               saved.append, lambda _: None)
    assert client.ack_files(owner, [part.id]) == 1  # gone from the relay (expired, a store wiped)
    done = upload(client, owner.fingerprint, tag, saved[-1], saved.append, lambda _: None)
    assert (done.id, done.key) != (part.id, part.key) and done.sha256 == part.sha256
    assert opened(client, owner, done) == src.read_bytes()
    with pytest.raises(RelayError):
        client.get_chunk(owner, part.id, 0)


def contact_of(identity: Identity) -> Contact:
    return pinned_contact("bob", identity.bundle(), Source.ADDED)


def test_the_same_command_finds_its_transfer_and_another_does_not(tmp_path: Path) -> None:
    book = TransferBook(tmp_path / "alice")
    bob = contact_of(Identity.generate("bob"))
    src = tmp_path / "a.txt"
    src.write_text("hello")
    first, new = begin(book, bob, [str(src), str(src)], "see this")
    assert new and [(p.name, p.size) for p in first.files] == [("a.txt", 5)]  # named twice, sent once
    again, new_again = begin(book, bob, [str(src)], "see this")  # the same command
    assert (again, new_again) == (first, False)
    other, _ = begin(book, bob, [str(src)], "another text")
    assert other.id != first.id
    assert first.key == command_key(bob.fingerprint, [str(src)], "see this")
    assert Transfer.from_json(first.to_json()) == first
    assert {t.id for t in book.pending()} == {first.id, other.id}
    book.finish(first.id)
    assert [t.id for t in book.pending()] == [other.id]


def test_the_same_command_run_twice_at_once_records_one_transfer(tmp_path: Path) -> None:
    book = TransferBook(tmp_path / "alice")
    bob = contact_of(Identity.generate("bob"))
    src = tmp_path / "a.txt"
    src.write_text("hello")
    found: list[Transfer] = []

    def second() -> None:
        found.append(begin(book, bob, [str(src)], "see this")[0])

    rival = threading.Thread(target=second)

    def admit() -> None:  # the first run is between its look and its record: the second starts
        rival.start()
        rival.join(0.2)  # it waits for the first's look-and-record to end, however long it is given

    first, new = begin(book, bob, [str(src)], "see this", admit=admit)
    rival.join()
    assert new and [t.id for t in found] == [first.id]
    assert [t.id for t in book.pending()] == [first.id]


def test_a_long_text_goes_as_a_body_part(tmp_path: Path) -> None:
    book = TransferBook(tmp_path / "alice")
    text = "é" * 40_000
    transfer, _ = begin(book, contact_of(Identity.generate("bob")), [], text)
    assert transfer.text == "" and transfer.files == () and transfer.body is not None
    assert transfer.body.name is None and transfer.body.size == len(text.encode())
    assert Path(transfer.body.path).read_text() == text
    assert oct(Path(transfer.body.path).stat().st_mode & 0o777) == "0o600"


def test_a_file_changed_since_it_was_hashed_starts_over(tmp_path: Path) -> None:
    src = tmp_path / "a.txt"
    src.write_text("one")
    part = _new_part(str(src), "a.txt", *file_digest(str(src)))
    assert _still_same(part) is part
    src.write_text("two")
    changed = _still_same(part)
    assert changed.sha256 != part.sha256 and (changed.id, changed.key) != (part.id, part.key)


def test_finishing_a_transfer_erases_a_killed_writer_copy_of_its_record(tmp_path: Path) -> None:
    book = TransferBook(tmp_path / "alice")
    src = tmp_path / "a.txt"
    src.write_text("hello")
    transfer, _ = begin(book, contact_of(Identity.generate("bob")), [str(src)], "see this")
    record = book.folder / f"{transfer.id}.json"
    copy = book.folder / f".{transfer.id}.json.999999999.abcd.tmp"  # a writer killed mid-save
    copy.write_bytes(record.read_bytes())
    other = book.folder / ".0123.json.999999999.abcd.tmp"  # not this transfer's
    other.write_bytes(b"x")
    book.finish(transfer.id)
    assert not record.exists() and not copy.exists() and other.exists()
