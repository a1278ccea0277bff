"""follower.files.taker: a parked message is handed on once, only with its files in, and after
it no key that opens them is left; a bad file quarantines it and tells its sender."""

from __future__ import annotations

import base64
import hashlib
import os
from pathlib import Path
from typing import Any

import pytest

from durable.errors import RelayError
from follower.files.download import SAVE_EVERY
from follower.files.parked import Parked
from follower.files.taker import FileTaker
from keys.fileref import FileRef
from keys.filestream import CHUNK_BYTES, Sealer, chunk_count
from spool_writer.spool import Spool

MSG = "1" * 32
SENDER = "2" * 32


class Relay:
    """The chunks a sender put, as the relay keeps them (`FileRelay`); `fail_at` breaks one fetch."""

    def __init__(self) -> None:
        self.chunks: dict[tuple[str, int], bytes] = {}
        self.asked: list[tuple[str, int]] = []
        self.acked: list[str] = []
        self.fail_at: tuple[str, int] | None = None
        self.fail_ack = False

    def upload(self, data: bytes, name: str | None = "a.txt") -> FileRef:
        key = os.urandom(32)
        sealer = Sealer(key)
        file_id = os.urandom(16).hex()
        count = chunk_count(len(data))
        for i in range(count):
            self.chunks[file_id, i] = sealer.seal(data[i * CHUNK_BYTES:(i + 1) * CHUNK_BYTES], i == count - 1)
        return FileRef(file_id, name, len(data), hashlib.sha256(data).hexdigest(), key, sealer.header)

    def get_chunk(self, owner: object, file_id: str, index: int) -> bytes:
        self.asked.append((file_id, index))
        if self.fail_at == (file_id, index):
            self.fail_at = None
            raise OSError("connection reset")
        if (file_id, index) not in self.chunks:
            raise RelayError("no such chunk", 404, "no_such_chunk")
        return self.chunks[file_id, index]

    def ack_files(self, owner: object, file_ids: list[str]) -> int:
        if self.fail_ack:
            self.fail_ack = False
            raise RelayError("relay down", 503)
        self.acked += file_ids
        return sum(1 for k in list(self.chunks) if k[0] in file_ids and self.chunks.pop(k))


class Setup:
    def __init__(self, folder: Path) -> None:
        self.folder = folder
        folder.mkdir(mode=0o700, exist_ok=True)
        self.relay = Relay()
        self.spool = Spool(folder / "spool")
        self.kept: list[tuple[str, str, list[str], str]] = []
        self.told: list[tuple[str, str, str, str]] = []

    def taker(self) -> FileTaker:
        def keep(msg_id: str, sender: str, ids: list[str], reason: str) -> None:
            self.kept.append((msg_id, sender, ids, reason))

        def tell(sender: str, msg_id: str, state: str, reason: str) -> None:
            self.told.append((sender, msg_id, state, reason))

        return FileTaker(Any, self.folder, self.relay, self.deliver, "spooled", keep, tell)  # type: ignore[arg-type]

    def deliver(self, record: dict[str, Any]) -> None:
        self.spool.deliver(record)  # type: ignore[arg-type]

    def park(self, files: list[FileRef], body: FileRef | None = None, text: str = "see") -> None:
        record = {"id": MSG, "from": SENDER, "name": "bob", "text": text, "ts": "2026-01-01T00:00:00Z",
                  "kind": "chat"}
        Parked(self.folder).park(record, SENDER, files, body, None, True)

    def spooled(self) -> list[dict[str, Any]]:
        import json

        return [json.loads(line) for line in self.spool.layout.inbox.read_text().splitlines()]


def no_trace_of(folder: Path, refs: list[FileRef]) -> None:
    secrets = [s for r in refs for s in (r.key, base64.b64encode(r.key), r.key.hex().encode())]
    for path in folder.rglob("*"):
        if path.is_file() and not path.is_symlink():
            data = path.read_bytes()
            assert not any(s in data for s in secrets), f"a key is left in {path}"


def test_a_message_is_handed_on_with_its_files_then_its_keys_are_gone(tmp_path: Path) -> None:
    s = Setup(tmp_path / "id")
    one, two = os.urandom(3 * CHUNK_BYTES + 7), b""
    refs = [s.relay.upload(one, "../../etc/passwd"), s.relay.upload(two, "empty")]
    s.park(refs)
    assert s.taker().take_all() == 1
    (line,) = s.spooled()
    assert line["text"] == "see" and [f["name"] for f in line["files"]] == ["_._etc_passwd", "empty"]
    assert Path(line["files"][0]["path"]).read_bytes() == one
    assert Path(line["files"][0]["path"]).parent == tmp_path / "id" / "downloads"
    assert line["files"][0]["sha256"] == refs[0].sha256 and line["files"][0]["size"] == len(one)
    assert Path(line["files"][1]["path"]).read_bytes() == b""
    assert sorted(s.relay.acked) == sorted(r.id for r in refs) and not s.relay.chunks
    assert s.told == [(SENDER, MSG, "spooled", "")] and not s.kept
    assert not Parked(s.folder).waiting() and not list(Parked(s.folder).partial.iterdir())
    no_trace_of(tmp_path, refs)


def test_a_long_body_becomes_the_text_and_is_not_a_download(tmp_path: Path) -> None:
    s = Setup(tmp_path / "id")
    text = "é" * 100_000
    body = s.relay.upload(text.encode(), None)
    s.park([], body, text="")
    s.taker().take_all()
    (line,) = s.spooled()
    assert line["text"] == text and line["files"] == []
    assert not (s.folder / "downloads").exists() or not list((s.folder / "downloads").iterdir())


def test_a_download_cut_off_resumes_from_its_saved_point(tmp_path: Path) -> None:
    s = Setup(tmp_path / "id")
    data = os.urandom((SAVE_EVERY * 2 + 2) * CHUNK_BYTES)
    ref = s.relay.upload(data)
    s.park([ref])
    s.relay.fail_at = (ref.id, SAVE_EVERY * 2 + 1)
    with pytest.raises(OSError):
        s.taker().take_all()
    assert not s.spool.layout.inbox.exists()  # not handed on before its files are in
    assert Parked(s.folder).waiting()[0].progress(ref.id) is not None
    s.relay.asked.clear()
    s.taker().take_all()
    assert s.relay.asked[0] == (ref.id, SAVE_EVERY * 2)
    (line,) = s.spooled()
    assert Path(line["files"][0]["path"]).read_bytes() == data


def test_handed_on_once_when_the_ack_after_it_failed(tmp_path: Path) -> None:
    s = Setup(tmp_path / "id")
    ref = s.relay.upload(b"hello")
    s.park([ref])
    s.relay.fail_ack = True
    with pytest.raises(RelayError):
        s.taker().take_all()
    s.taker().take_all()
    assert len(s.spooled()) == 1 and len(list((s.folder / "downloads").iterdir())) == 1
    assert not Parked(s.folder).waiting()


@pytest.mark.parametrize(("break_it", "reason"), [
    (lambda r, ref: r.chunks.__setitem__((ref.id, 0), r.chunks[ref.id, 0][:-1] + b"\0"), "does not open"),
    (lambda r, ref: r.chunks.pop((ref.id, 1)), "not on the relay"),
])
def test_a_bad_file_quarantines_the_message_and_refuses_it(tmp_path: Path, break_it: Any,
                                                          reason: str) -> None:
    s = Setup(tmp_path / "id")
    ref = s.relay.upload(os.urandom(2 * CHUNK_BYTES))
    s.park([ref])
    break_it(s.relay, ref)
    s.taker().take_all()
    assert not s.spool.layout.inbox.exists()
    ((msg_id, sender, ids, why),) = s.kept
    assert (msg_id, sender, ids) == (MSG, SENDER, [ref.id]) and reason in why
    assert s.told[0][:3] == (SENDER, MSG, "refused") and reason in s.told[0][3]
    assert ref.id in s.relay.acked and not Parked(s.folder).waiting()
    assert not (s.folder / "downloads").exists() or not list((s.folder / "downloads").iterdir())
    no_trace_of(tmp_path, [ref])


def test_a_wrong_hash_and_a_file_over_the_limit_are_refused(tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    s = Setup(tmp_path / "id")
    ref = s.relay.upload(b"x" * 100)
    s.park([ref._replace(sha256="0" * 64)])
    s.taker().take_all()
    assert "sha256" in s.kept[-1][3]
    monkeypatch.setenv("TALK_MAX_FILE_BYTES", "99")
    s.park([s.relay.upload(b"y" * 100)])
    s.taker().take_all()
    assert "over this side's limit" in s.kept[-1][3]


def test_a_held_message_is_held_once_its_files_are_in_and_past_the_cap_refused(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from follower.held import HeldBox

    s = Setup(tmp_path / "id")
    ref = s.relay.upload(b"held file")
    record = {"id": MSG, "from": SENDER, "name": "bob", "text": "t", "ts": "2026-01-01T00:00:00Z",
              "kind": "chat"}
    Parked(s.folder).park(record, SENDER, [ref], None, "bob is held", True)
    s.taker().take_all()
    assert not s.spool.layout.inbox.exists() and s.told == [(SENDER, MSG, "held", "bob is held")]
    (held,) = HeldBox(s.folder).all().values()
    assert Path(held["record"]["files"][0]["path"]).read_bytes() == b"held file"
    monkeypatch.setenv("TALK_HELD_MAX", "1")
    other = s.relay.upload(b"one too many")
    Parked(s.folder).park({**record, "id": "3" * 32}, SENDER, [other], None, "held", True)
    s.taker().take_all()
    assert s.told[-1][2] == "refused" and len(list((s.folder / "downloads").iterdir())) == 1


def test_a_damaged_parked_record_stands_in_no_ones_way(tmp_path: Path) -> None:
    s = Setup(tmp_path / "id")
    s.park([s.relay.upload(b"fine")])
    (Parked(s.folder).folder / ("4" * 32 + ".json")).write_bytes(b"{torn")
    assert s.taker().take_all() == 1 and len(s.spooled()) == 1


def test_a_message_refused_for_its_second_file_leaves_not_its_first_in_downloads(tmp_path: Path) -> None:
    s = Setup(tmp_path / "id")
    good, bad = s.relay.upload(b"fine"), s.relay.upload(b"altered")
    s.park([good, bad._replace(sha256="0" * 64)])
    s.taker().take_all()
    assert "sha256" in s.kept[0][3] and list((s.folder / "downloads").iterdir()) == []


def test_a_save_cut_short_by_a_kill_leaves_no_copy_of_the_keys(tmp_path: Path) -> None:
    import subprocess

    s = Setup(tmp_path / "id")
    ref = s.relay.upload(b"kept whole")
    s.park([ref])
    gone = subprocess.Popen(["true"])
    gone.wait()
    parked = Parked(s.folder).folder
    (parked / f".{MSG}.json.{gone.pid}.abcd1234.tmp").write_bytes(base64.b64encode(ref.key))
    s.taker().take_all()
    assert list(parked.iterdir()) == []
    no_trace_of(tmp_path, [ref])


OTHER = "4" * 32


def park_as(s: Setup, msg_id: str, sender: str, files: list[FileRef], text: str) -> None:
    record = {"id": msg_id, "from": sender, "name": "n", "text": text, "ts": "2026-01-01T00:00:00Z",
              "kind": "chat"}
    Parked(s.folder).park(record, sender, files, None, None, True)


def test_mail_parked_behind_a_file_message_follows_it_and_no_one_else_waits(tmp_path: Path) -> None:
    s = Setup(tmp_path / "id")
    ref = s.relay.upload(os.urandom(2 * CHUNK_BYTES))
    park_as(s, "f" * 32, SENDER, [ref], "the file")
    park_as(s, "b" * 32, SENDER, [], "after the file")
    park_as(s, "c" * 32, OTHER, [], "someone else's")
    parked = Parked(s.folder)
    for message in parked.waiting():  # the clock went back meanwhile: they stay in the order they came
        message.data["parked"] = -float(message.data["order"])
        parked.save(message)
    s.relay.fail_at = (ref.id, 1)
    with pytest.raises(OSError):
        s.taker().take_all()
    assert [r["text"] for r in s.spooled()] == ["someone else's"]  # the other sender's went on
    assert Parked(s.folder).ids() == {"f" * 32, "b" * 32}
    s.taker().take_all()
    lines = s.spooled()
    assert [r["text"] for r in lines] == ["someone else's", "the file", "after the file"]
    assert "files" not in lines[2] and len(lines[1]["files"]) == 1
    assert [t[1:3] for t in s.told] == [("c" * 32, "spooled"), ("f" * 32, "spooled"), ("b" * 32, "spooled")]
    assert s.relay.acked == [ref.id]  # a message with no files acks none


def test_mail_behind_a_refused_file_message_goes_on_after_it(tmp_path: Path) -> None:
    s = Setup(tmp_path / "id")
    ref = s.relay.upload(b"x" * 100)
    park_as(s, "a" * 32, SENDER, [ref._replace(sha256="0" * 64)], "bad file")
    park_as(s, "b" * 32, SENDER, [], "after it")
    s.taker().take_all()
    assert [r["text"] for r in s.spooled()] == ["after it"]
    assert [t[1:3] for t in s.told] == [("a" * 32, "refused"), ("b" * 32, "spooled")]
    assert not Parked(s.folder).waiting()
