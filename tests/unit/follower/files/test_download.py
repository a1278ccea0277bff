"""follower.files.download: a file comes whole, byte for byte, or not at all, with the reason;
a download cut off anywhere goes on from its last saved point."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from durable.errors import RelayError
from follower.files.download import SAVE_EVERY, DownloadFailed, Progress, download, missing_chunk
from keys.fileref import FileRef
from keys.filestream import CHUNK_BYTES, Sealer, chunk_count

KEY = os.urandom(32)


def sealed(data: bytes, chunks: int | None = None) -> tuple[bytes, list[bytes]]:
    """The stream header and sealed chunks of `data` (cut into `chunks`, default as many as it fills)."""
    sealer = Sealer(KEY)
    count = chunks or chunk_count(len(data))
    parts = [data[i * CHUNK_BYTES:(i + 1) * CHUNK_BYTES] for i in range(count)]
    if count > chunk_count(len(data)):
        parts[-1] = data[(count - 1) * CHUNK_BYTES:]
    return sealer.header, [sealer.seal(p, last=i == count - 1) for i, p in enumerate(parts)]


def ref_for(data: bytes, header: bytes, size: int | None = None) -> FileRef:
    return FileRef("a" * 32, "f.bin", len(data) if size is None else size, hashlib.sha256(data).hexdigest(),
                   KEY, header)


def run(ref: FileRef, chunks: list[bytes], partial: Path, saved: Progress | None = None,
        limit: int = 2**30) -> list[Progress]:
    saves: list[Progress] = []
    download(ref, chunks.__getitem__, partial, saved, saves.append, limit)
    return saves


@pytest.mark.parametrize("size", [0, 1, CHUNK_BYTES, CHUNK_BYTES + 1, (SAVE_EVERY * 2 + 1) * CHUNK_BYTES - 3])
def test_a_file_arrives_byte_for_byte(tmp_path: Path, size: int) -> None:
    data = os.urandom(size)
    header, chunks = sealed(data)
    saves = run(ref_for(data, header), chunks, tmp_path / "p")
    assert (tmp_path / "p").read_bytes() == data
    assert [s.chunk for s in saves] == [n for n in range(SAVE_EVERY, len(chunks), SAVE_EVERY)]
    assert oct((tmp_path / "p").stat().st_mode & 0o777) == "0o600"


def test_a_download_cut_off_goes_on_from_its_saved_point(tmp_path: Path) -> None:
    data = os.urandom((SAVE_EVERY * 3) * CHUNK_BYTES + 5)
    header, chunks = sealed(data)
    ref = ref_for(data, header)
    saves: list[Progress] = []
    asked: list[int] = []

    def dies_at(index: int) -> bytes:
        if index == SAVE_EVERY * 2 + 3:
            raise OSError("killed")
        return chunks[index]

    with pytest.raises(OSError):
        download(ref, dies_at, tmp_path / "p", None, saves.append, 2**30)
    assert (tmp_path / "p").stat().st_size > saves[-1].offset  # written past the saved point

    def fetch(index: int) -> bytes:
        asked.append(index)
        return chunks[index]

    download(ref, fetch, tmp_path / "p", saves[-1], saves.append, 2**30)
    assert asked[0] == SAVE_EVERY * 2 and (tmp_path / "p").read_bytes() == data


def test_a_saved_point_the_partial_file_cannot_back_starts_over(tmp_path: Path) -> None:
    data = os.urandom(SAVE_EVERY * 2 * CHUNK_BYTES)
    header, chunks = sealed(data)
    ref = ref_for(data, header)
    saves = run(ref, chunks, tmp_path / "p")
    (tmp_path / "p").write_bytes(b"")  # cut shorter than the point
    run(ref, chunks, tmp_path / "p", saves[0])
    assert (tmp_path / "p").read_bytes() == data
    run(ref, chunks, tmp_path / "p", saves[0]._replace(state=b"short"))  # a damaged state
    assert (tmp_path / "p").read_bytes() == data


def test_a_tampered_chunk_fails(tmp_path: Path) -> None:
    data = os.urandom(3 * CHUNK_BYTES)
    header, chunks = sealed(data)
    chunks[1] = chunks[1][:100] + bytes([chunks[1][100] ^ 1]) + chunks[1][101:]
    with pytest.raises(DownloadFailed, match=r"chunk 1 of 3.*does not open"):
        run(ref_for(data, header), chunks, tmp_path / "p")


def test_chunks_out_of_order_fail(tmp_path: Path) -> None:
    data = os.urandom(3 * CHUNK_BYTES)
    header, chunks = sealed(data)
    with pytest.raises(DownloadFailed, match="chunk 0"):
        run(ref_for(data, header), [chunks[1], chunks[0], chunks[2]], tmp_path / "p")


def test_a_wrong_hash_fails(tmp_path: Path) -> None:
    data = os.urandom(CHUNK_BYTES + 9)
    header, chunks = sealed(data)
    with pytest.raises(DownloadFailed, match="sha256"):
        run(ref_for(data, header)._replace(sha256="0" * 64), chunks, tmp_path / "p")


def test_a_file_shorter_than_announced_fails(tmp_path: Path) -> None:
    data = os.urandom(2 * CHUNK_BYTES)
    header, chunks = sealed(data)
    with pytest.raises(DownloadFailed, match="ends before its last chunk"):
        run(ref_for(data, header, size=3 * CHUNK_BYTES), chunks, tmp_path / "p")
    short = data[:CHUNK_BYTES + 5]
    header, chunks = sealed(short)
    with pytest.raises(DownloadFailed, match="fewer bytes than announced"):
        run(ref_for(short, header, size=CHUNK_BYTES + 10), chunks, tmp_path / "p")


def test_a_file_longer_than_announced_fails(tmp_path: Path) -> None:
    data = os.urandom(CHUNK_BYTES + 100)
    header, chunks = sealed(data)
    with pytest.raises(DownloadFailed, match="more bytes than announced"):
        run(ref_for(data, header, size=CHUNK_BYTES + 50), chunks, tmp_path / "p")
    with pytest.raises(DownloadFailed, match="does not end its stream"):
        run(ref_for(data, header, size=CHUNK_BYTES), chunks[:1], tmp_path / "p")


def test_a_file_over_the_limit_fails_before_any_fetch(tmp_path: Path) -> None:
    data = os.urandom(10)
    header, _ = sealed(data)
    with pytest.raises(DownloadFailed, match="over this side's limit"):
        download(ref_for(data, header), lambda i: pytest.fail("fetched"), tmp_path / "p", None, print, 9)


def test_a_chunk_the_relay_lacks_fails_other_relay_errors_are_faults() -> None:
    assert isinstance(missing_chunk(RelayError("gone", 404, "no_such_chunk"), 3), DownloadFailed)
    busy = RelayError("busy", 503, "unavailable")
    assert missing_chunk(busy, 3) is busy


def test_a_symlink_at_the_partial_path_is_refused(tmp_path: Path) -> None:
    from durable.errors import LocalFileRefused

    (tmp_path / "p").symlink_to(tmp_path / "target")
    data = os.urandom(10)
    header, chunks = sealed(data)
    with pytest.raises(LocalFileRefused):
        run(ref_for(data, header), chunks, tmp_path / "p")
    assert not (tmp_path / "target").exists()
