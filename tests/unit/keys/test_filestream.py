"""keys.filestream: chunks open only in place, the stream must end where the file ends, and a
stream resumed from its saved state seals exactly what an uninterrupted one does."""

from __future__ import annotations

import os
import random

import pytest

from durable.errors import TamperedChunk, TamperedMessage
from keys.filestream import ABYTES, CHUNK_BYTES, HEADER_BYTES, Opener, Sealer, chunk_count

KEY = bytes(range(32))


def plain_chunks(size: int, seed: int = 7) -> list[bytes]:
    data = random.Random(seed).randbytes(size)
    return [data[i:i + CHUNK_BYTES] for i in range(0, max(size, 1), CHUNK_BYTES)] or [b""]


def sealed(chunks: list[bytes], key: bytes = KEY) -> tuple[bytes, list[bytes]]:
    sealer = Sealer(key)
    return sealer.header, [sealer.seal(c, i == len(chunks) - 1) for i, c in enumerate(chunks)]


def opened(header: bytes, chunks: list[bytes], key: bytes = KEY) -> list[bytes]:
    opener = Opener(key, header)
    return [opener.open(c, i == len(chunks) - 1) for i, c in enumerate(chunks)]


@pytest.mark.parametrize("size", [0, 1, CHUNK_BYTES - 1, CHUNK_BYTES, CHUNK_BYTES + 1, 3 * CHUNK_BYTES + 5])
def test_round_trip_and_count(size: int) -> None:
    chunks = plain_chunks(size)
    assert len(chunks) == chunk_count(size)
    header, out = sealed(chunks)
    assert len(header) == HEADER_BYTES
    assert all(len(s) == len(p) + ABYTES for s, p in zip(out, chunks, strict=True))
    assert opened(header, out) == chunks


def test_chunk_count_edges() -> None:
    assert [chunk_count(n) for n in (0, 1, CHUNK_BYTES, CHUNK_BYTES + 1)] == [1, 1, 1, 2]
    with pytest.raises(ValueError):
        chunk_count(-1)


def test_a_flipped_bit_is_a_tampered_chunk() -> None:
    header, out = sealed(plain_chunks(2 * CHUNK_BYTES))
    bad = bytearray(out[1])
    bad[40] ^= 1
    opener = Opener(KEY, header)
    opener.open(out[0], False)
    with pytest.raises(TamperedChunk) as caught:
        opener.open(bytes(bad), True)
    assert isinstance(caught.value, TamperedMessage)


def test_reordered_chunks_do_not_open() -> None:
    header, out = sealed(plain_chunks(3 * CHUNK_BYTES))
    with pytest.raises(TamperedChunk):
        opened(header, [out[1], out[0], out[2]])


def test_a_repeated_chunk_does_not_open() -> None:
    header, out = sealed(plain_chunks(3 * CHUNK_BYTES))
    with pytest.raises(TamperedChunk):
        opened(header, [out[0], out[0], out[2]])


def test_truncated_stream_has_no_final_tag() -> None:
    header, out = sealed(plain_chunks(3 * CHUNK_BYTES))
    with pytest.raises(TamperedChunk, match="truncated"):
        opened(header, out[:2])


def test_a_final_tag_before_the_end_is_refused() -> None:
    sealer = Sealer(KEY)
    early = [sealer.seal(b"x" * CHUNK_BYTES, True)]
    with pytest.raises(TamperedChunk, match="ends before"):
        Opener(KEY, sealer.header).open(early[0], False)


def test_wrong_key_or_header_or_another_files_chunk() -> None:
    header, out = sealed(plain_chunks(10))
    with pytest.raises(TamperedChunk):
        Opener(os.urandom(32), header).open(out[0], True)
    with pytest.raises(TamperedChunk):
        Opener(KEY, os.urandom(HEADER_BYTES)).open(out[0], True)
    _, other = sealed(plain_chunks(10, seed=8))
    with pytest.raises(TamperedChunk):
        Opener(KEY, header).open(other[0], True)
    with pytest.raises(TamperedChunk):
        Opener(KEY, header[:-1])


@pytest.mark.parametrize("size", [0, ABYTES - 1, CHUNK_BYTES + ABYTES + 1])
def test_a_chunk_of_impossible_size_is_refused(size: int) -> None:
    header, _ = sealed(plain_chunks(10))
    with pytest.raises(TamperedChunk):
        Opener(KEY, header).open(b"\0" * size, True)


def test_a_sealer_resumed_from_its_state_seals_what_an_uninterrupted_one_does() -> None:
    chunks = plain_chunks(5 * CHUNK_BYTES + 3)
    header, _ = sealed(chunks)
    # An upload that stopped after chunk 2, with its state saved there, and a header from the start.
    first = Sealer(KEY, None)
    first_out = [first.seal(c, False) for c in chunks[:3]]
    saved = first.state()
    resumed = Sealer(KEY, saved)
    rest = [resumed.seal(c, i == len(chunks) - 1) for i, c in enumerate(chunks[3:], start=3)]
    assert opened(first.header, first_out + rest) == chunks
    # Re-sealing from the same state gives the same bytes: a re-sent chunk changes nothing.
    again = Sealer(KEY, saved)
    assert again.seal(chunks[3], False) == rest[0]
    assert header != first.header  # each stream gets its own random header


def test_an_opener_resumed_from_its_state_goes_on_in_place() -> None:
    chunks = plain_chunks(3 * CHUNK_BYTES)
    header, out = sealed(chunks)
    opener = Opener(KEY, header)
    opener.open(out[0], False)
    resumed = Opener(KEY, header, opener.state())
    assert resumed.open(out[1], False) == chunks[1]
    assert resumed.open(out[2], True) == chunks[2]


def test_a_failed_open_leaves_the_state_where_it_was() -> None:
    chunks = plain_chunks(2 * CHUNK_BYTES)
    header, out = sealed(chunks)
    opener = Opener(KEY, header)
    with pytest.raises(TamperedChunk):
        opener.open(out[1], False)
    assert opener.open(out[0], False) == chunks[0]


def test_bad_sizes_are_refused_up_front() -> None:
    with pytest.raises(ValueError):
        Sealer(b"short")
    with pytest.raises(ValueError):
        Sealer(KEY, b"short state")
    with pytest.raises(ValueError):
        Sealer(KEY).seal(b"x" * (CHUNK_BYTES + 1), True)
