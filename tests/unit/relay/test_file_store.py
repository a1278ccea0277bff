"""relay.file_store on every backend: chunks kept per file, idempotent, held to their tag, under
quotas that a stranger's tags cannot use up for the owner's contacts, gone on ack or expiry."""

from __future__ import annotations

import asyncio
import secrets
from typing import Any

import pytest

from keys.filestream import ABYTES, CHUNK_BYTES
from relay.file_store import ChunkOutcome, FileProgress, FileQuota, Usage, first_missing, judge
from relay.store import Store
from tests.unit.relay.conftest import Run

NOW = 1_800_000_000.25
ROOMY = FileQuota(max_file_bytes=10 * CHUNK_BYTES, max_files=100, max_bytes=10**9,
                  max_unknown_files=100, max_unknown_bytes=10**9)


def hexid() -> str:
    return secrets.token_hex(16)


def chunk(n: int = 100, fill: int = 1) -> bytes:
    return bytes([fill]) * n


def put(run: Run[Any], store: Store, fp: str, tag: str, file_id: str, index: int, blob: bytes,
        quota: FileQuota = ROOMY, now: float = NOW) -> ChunkOutcome:
    outcome: ChunkOutcome = run(store.files.put_chunk(fp, tag, file_id, index, blob, now, quota))
    return outcome


def test_first_missing() -> None:
    assert first_missing([]) == 0
    assert first_missing([0, 1, 2]) == 3
    assert first_missing([0, 2, 3]) == 1
    assert first_missing([1]) == 0


def test_judge_is_the_one_rule() -> None:
    q = FileQuota(100, 2, 1000, 1, 50)
    sealed = q.sealed_file_bytes
    assert judge(q, None, 10, True, Usage(0, 0)) is ChunkOutcome.STORED
    assert judge(q, sealed - 10, 11, True, Usage(1, 0)) is ChunkOutcome.FILE_FULL
    assert judge(q, None, 10, True, Usage(2, 0)) is ChunkOutcome.MAILBOX_FULL
    assert judge(q, 5, 10, True, Usage(2, 0)) is ChunkOutcome.STORED  # an old file goes on
    assert judge(q, 5, 10, True, Usage(2, 995)) is ChunkOutcome.MAILBOX_FULL
    assert judge(q, None, 10, False, Usage(1, 0)) is ChunkOutcome.UNKNOWN_FULL
    assert judge(q, 5, 46, False, Usage(1, 5)) is ChunkOutcome.UNKNOWN_FULL
    shared = FileQuota(100, 2, 1000, 1, 50, max_tag_bytes=30)
    assert judge(shared, None, 10, True, Usage(1, 25, 25)) is ChunkOutcome.TAG_FULL
    assert judge(shared, None, 10, True, Usage(1, 25, 20)) is ChunkOutcome.STORED
    assert judge(shared, None, 40, False, Usage(0, 0, 0)) is ChunkOutcome.STORED  # strangers: their own cap


def test_chunks_round_trip_and_progress_counts_from_the_first_gap(store: Store, run: Run[Any]) -> None:
    fp, tag, f = hexid(), hexid(), hexid()
    assert run(store.files.progress(fp, f)) == FileProgress(0, 0)
    for i in (0, 1, 3):
        assert put(run, store, fp, tag, f, i, chunk(fill=i)) is ChunkOutcome.STORED
    assert run(store.files.progress(fp, f)) == FileProgress(2, 300)
    assert run(store.files.get_chunk(fp, f, 3)) == chunk(fill=3)
    assert run(store.files.get_chunk(fp, f, 2)) is None
    assert run(store.files.get_chunk(hexid(), f, 0)) is None  # another mailbox holds nothing of it


def test_a_chunk_put_again_changes_nothing(store: Store, run: Run[Any]) -> None:
    fp, tag, f = hexid(), hexid(), hexid()
    assert put(run, store, fp, tag, f, 0, chunk(fill=1)) is ChunkOutcome.STORED
    assert put(run, store, fp, tag, f, 0, chunk(fill=9)) is ChunkOutcome.KEPT
    assert run(store.files.get_chunk(fp, f, 0)) == chunk(fill=1)
    assert run(store.files.progress(fp, f)) == FileProgress(1, 100)


def test_a_file_is_held_to_its_tag(store: Store, run: Run[Any]) -> None:
    fp, tag, f = hexid(), hexid(), hexid()
    put(run, store, fp, tag, f, 0, chunk())
    assert put(run, store, fp, hexid(), f, 1, chunk()) is ChunkOutcome.WRONG_TAG
    assert put(run, store, fp, hexid(), f, 0, chunk()) is ChunkOutcome.WRONG_TAG


def test_a_file_stops_at_its_limit(store: Store, run: Run[Any]) -> None:
    fp, tag, f = hexid(), hexid(), hexid()
    quota = FileQuota(2 * CHUNK_BYTES, 100, 10**9, 100, 10**9)
    full = chunk(CHUNK_BYTES + ABYTES)
    assert put(run, store, fp, tag, f, 0, full, quota) is ChunkOutcome.STORED
    assert put(run, store, fp, tag, f, 1, full, quota) is ChunkOutcome.STORED
    assert put(run, store, fp, tag, f, 2, chunk(ABYTES + 1), quota) is ChunkOutcome.FILE_FULL


def test_strangers_tags_cannot_use_up_the_owners_file_quota(store: Store, run: Run[Any]) -> None:
    fp, mine, junk = hexid(), hexid(), hexid()
    run(store.register_tags(fp, [mine], 100))
    quota = FileQuota(10 * CHUNK_BYTES, 2, 1000, 1, 250)
    assert put(run, store, fp, junk, hexid(), 0, chunk(), quota) is ChunkOutcome.STORED
    assert put(run, store, fp, junk, hexid(), 0, chunk(), quota) is ChunkOutcome.UNKNOWN_FULL  # one file
    assert put(run, store, fp, hexid(), hexid(), 0, chunk(), quota) is ChunkOutcome.UNKNOWN_FULL
    # The owner's contacts still have all of theirs.
    a, b = hexid(), hexid()
    assert put(run, store, fp, mine, a, 0, chunk(), quota) is ChunkOutcome.STORED
    assert put(run, store, fp, mine, b, 0, chunk(), quota) is ChunkOutcome.STORED
    assert put(run, store, fp, mine, hexid(), 0, chunk(), quota) is ChunkOutcome.MAILBOX_FULL
    assert put(run, store, fp, mine, a, 1, chunk(801), quota) is ChunkOutcome.MAILBOX_FULL  # bytes too
    assert put(run, store, fp, mine, a, 1, chunk(800), quota) is ChunkOutcome.STORED


def test_one_contact_holds_at_most_its_share(store: Store, run: Run[Any]) -> None:
    fp, alice, carol = hexid(), hexid(), hexid()
    run(store.register_tags(fp, [alice, carol], 100))
    quota = FileQuota(10 * CHUNK_BYTES, 10, 1000, 1, 100, max_tag_bytes=250)
    f = hexid()
    assert put(run, store, fp, alice, f, 0, chunk(200), quota) is ChunkOutcome.STORED
    assert put(run, store, fp, alice, f, 1, chunk(51), quota) is ChunkOutcome.TAG_FULL
    assert put(run, store, fp, alice, hexid(), 0, chunk(51), quota) is ChunkOutcome.TAG_FULL
    assert put(run, store, fp, carol, hexid(), 0, chunk(250), quota) is ChunkOutcome.STORED  # others' room
    run(store.files.ack(fp, [f]))
    assert put(run, store, fp, alice, hexid(), 0, chunk(250), quota) is ChunkOutcome.STORED


def test_the_unknown_quota_counts_bytes(store: Store, run: Run[Any]) -> None:
    fp, junk, f = hexid(), hexid(), hexid()
    quota = FileQuota(10 * CHUNK_BYTES, 10, 10**9, 10, 250)
    assert put(run, store, fp, junk, f, 0, chunk(200), quota) is ChunkOutcome.STORED
    assert put(run, store, fp, junk, f, 1, chunk(51), quota) is ChunkOutcome.UNKNOWN_FULL


def test_registering_the_tag_moves_a_file_to_the_owners_quota(store: Store, run: Run[Any]) -> None:
    fp, tag, f = hexid(), hexid(), hexid()
    quota = FileQuota(10 * CHUNK_BYTES, 10, 10**6, 1, 150)
    assert put(run, store, fp, tag, f, 0, chunk(), quota) is ChunkOutcome.STORED
    assert put(run, store, fp, tag, f, 1, chunk(), quota) is ChunkOutcome.UNKNOWN_FULL
    run(store.register_tags(fp, [tag], 100))
    assert put(run, store, fp, tag, f, 1, chunk(), quota) is ChunkOutcome.STORED
    assert put(run, store, fp, hexid(), hexid(), 0, chunk(), quota) is ChunkOutcome.STORED  # room freed


def test_ack_deletes_the_owners_files_only(store: Store, run: Run[Any]) -> None:
    fp, other, tag, f, g = hexid(), hexid(), hexid(), hexid(), hexid()
    put(run, store, fp, tag, f, 0, chunk())
    put(run, store, fp, tag, f, 1, chunk())
    put(run, store, other, tag, g, 0, chunk())
    assert run(store.files.ack(fp, [g, hexid()])) == 0  # another mailbox's file, an unknown one
    assert run(store.files.ack(fp, [f, f])) == 1
    assert run(store.files.get_chunk(fp, f, 0)) is None
    assert run(store.files.progress(fp, f)) == FileProgress(0, 0)
    assert run(store.files.get_chunk(other, g, 0)) == chunk()
    # The file's quota is free again: the same id starts over under any tag.
    assert put(run, store, fp, hexid(), f, 0, chunk()) is ChunkOutcome.STORED


def test_purge_unknown_deletes_only_files_under_unregistered_tags(store: Store, run: Run[Any]) -> None:
    fp, mine, junk, f, g = hexid(), hexid(), hexid(), hexid(), hexid()
    run(store.register_tags(fp, [mine], 100))
    put(run, store, fp, mine, f, 0, chunk())
    put(run, store, fp, junk, g, 0, chunk())
    put(run, store, hexid(), junk, hexid(), 0, chunk())  # another mailbox's junk stays
    assert run(store.files.purge_unknown(fp)) == 1
    assert run(store.files.get_chunk(fp, g, 0)) is None and run(store.files.get_chunk(fp, f, 0)) == chunk()


def test_purge_deletes_files_older_than_the_ttl(store: Store, run: Run[Any]) -> None:
    fp, tag, old, new = hexid(), hexid(), hexid(), hexid()
    put(run, store, fp, tag, old, 0, chunk(), now=NOW - 100)
    put(run, store, fp, tag, old, 1, chunk(), now=NOW)  # a late chunk does not make it young
    put(run, store, fp, tag, new, 0, chunk(), now=NOW - 10)
    assert run(store.files.purge(NOW, 50)) == 1
    assert run(store.files.get_chunk(fp, old, 1)) is None
    assert run(store.files.get_chunk(fp, new, 0)) == chunk()


def test_concurrent_chunks_never_pass_the_quota(store: Store, run: Run[Any]) -> None:
    fp, tag = hexid(), hexid()
    quota = FileQuota(10 * CHUNK_BYTES, 3, 10**9, 3, 10**9)

    async def race() -> list[ChunkOutcome]:
        return list(await asyncio.gather(*(
            store.files.put_chunk(fp, tag, hexid(), 0, chunk(), NOW, quota) for _ in range(10))))

    outcomes = run(race())
    assert outcomes.count(ChunkOutcome.STORED) == 3


@pytest.mark.parametrize("index", [0, 7, 123456])
def test_binary_chunks_under_any_index(store: Store, run: Run[Any], index: int) -> None:
    fp, tag, f = hexid(), hexid(), hexid()
    blob = bytes(range(256)) * 4
    put(run, store, fp, tag, f, index, blob)
    assert run(store.files.get_chunk(fp, f, index)) == blob


def test_redis_leaves_no_file_keys_once_acked_or_expired(redis_url: str, run: Run[Any]) -> None:
    from relay.redis_store import RedisStore
    from tests.redis_support import keys_under, redis_prefix

    with redis_prefix() as prefix:
        store = RedisStore(redis_url, prefix)
        fp, tag, f, g = hexid(), hexid(), hexid(), hexid()
        put(run, store, fp, tag, f, 0, chunk())
        put(run, store, fp, tag, g, 0, chunk(), now=NOW - 100)
        assert run(store.files.ack(fp, [f])) == 1
        assert run(store.files.purge(NOW, 50)) == 1
        assert keys_under(prefix) == []
        run(store.close())
