"""follower.receive.channeldb: the shared store's file, and its migration from seen.log."""

from __future__ import annotations

import os
import stat
import time
from pathlib import Path

import pytest

from durable.errors import TalkError
from follower.receive.channeldb import DB_FILE, ChannelDB, last_spooled, missing_mail
from follower.receive.sequence import KEEP_IDS_S, SequenceVerdict
from keys.encoding import iso_from_epoch
from keys.envelope import Inner

FP_A = "a" * 32
FP_B = "b" * 32


def inner(msg_id: str, seq: int | None, ts: float | None = None) -> Inner:
    when = iso_from_epoch(time.time() if ts is None else ts)
    return Inner(msg_id, FP_A, FP_B, when, "chat", "hi", {}, seq)


def test_the_store_is_private_and_in_wal_mode(tmp_path: Path) -> None:
    store = ChannelDB(tmp_path)
    store.add("1" * 32)
    mode = stat.S_IMODE(os.stat(tmp_path / DB_FILE).st_mode)
    journal = store.db.execute("PRAGMA journal_mode").fetchone()[0]
    store.close()
    assert mode == 0o600 and journal == "wal"


def test_ids_and_numbering_survive_a_reopen(tmp_path: Path) -> None:
    now = time.time()
    store = ChannelDB(tmp_path)
    assert store.record(FP_A, inner("1" * 32, 1), now).verdict is SequenceVerdict.NEW
    assert store.record(FP_A, inner("3" * 32, 3), now).verdict is SequenceVerdict.NEW
    store.close()
    again = ChannelDB(tmp_path)
    assert "1" * 32 in again
    assert again.judge(FP_A, inner("1" * 32, 1), now).verdict is SequenceVerdict.DUPLICATE
    assert again.judge(FP_A, inner("9" * 32, 3), now).verdict is SequenceVerdict.REPLAY
    assert again.missing(now) == {FP_A: 1}
    assert again.record(FP_A, inner("2" * 32, 2), now).verdict is SequenceVerdict.LATE
    assert again.missing(now) == {}
    again.close()


def test_a_refused_message_is_not_recorded(tmp_path: Path) -> None:
    store = ChannelDB(tmp_path)
    stale = inner("4" * 32, 1, ts=time.time() - 30 * 86400)
    assert store.record(FP_A, stale, time.time()).verdict is SequenceVerdict.STALE
    assert stale.id not in store and store.channel(FP_A).highest == 0
    store.close()


def test_seen_log_is_carried_over_once_and_left_in_place(tmp_path: Path) -> None:
    now = time.time()
    legacy = tmp_path / "seen.log"
    text = f"{now - 10:.0f} {'c' * 32}\n{now - KEEP_IDS_S - 10:.0f} {'d' * 32}\ntorn"
    legacy.write_text(text)
    store = ChannelDB(tmp_path)
    assert "c" * 32 in store and "d" * 32 not in store  # expired ids are not carried over
    store.close()
    legacy.write_text(f"{now:.0f} {'e' * 32}\n")
    store = ChannelDB(tmp_path)
    assert "e" * 32 not in store  # read once, at creation only
    store.close()
    assert legacy.exists()


def test_status_reads_no_store_into_being(tmp_path: Path) -> None:
    assert missing_mail(tmp_path, time.time()) == {}
    assert not (tmp_path / DB_FILE).exists()


def test_last_spooled_reads_only_the_tail_of_the_spool_index(tmp_path: Path) -> None:
    from spool_writer.layout import SpoolLayout

    assert last_spooled(tmp_path) == frozenset()
    layout = SpoolLayout(tmp_path / "spool")
    layout.root.mkdir()
    ids = [f"{i:032x}" for i in range(5000)]  # ~200 KB of entries
    entries = "".join(f"1800000000\t{i}\n" for i in ids) + f"1800000000\t{'f' * 32}\tinbox\n"
    layout.index.write_text(entries)
    tail = last_spooled(tmp_path)
    assert ids[-1] in tail and ids[0] not in tail
    assert "f" * 32 not in tail  # a delivery cut short is not a delivery
    assert all(len(i) == 32 for i in tail)  # the line cut by the tail's start is dropped


def test_a_damaged_store_is_one_clear_error(tmp_path: Path) -> None:
    (tmp_path / DB_FILE).write_bytes(b"not a database, " * 512)
    with pytest.raises(TalkError, match=r"cannot use .*channels\.db.*moved aside"):
        ChannelDB(tmp_path)


def test_a_symlinked_store_is_not_followed(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere.db"
    (tmp_path / DB_FILE).symlink_to(target)
    with pytest.raises(TalkError, match="cannot use"):
        ChannelDB(tmp_path)
    assert not target.exists()


def test_a_page_commits_together_after_its_block_or_not_at_all(tmp_path: Path) -> None:
    store = ChannelDB(tmp_path)
    now = time.time()
    with pytest.raises(RuntimeError), store.page():
        store.record(FP_A, inner("1" * 32, 1), now)
        assert "1" * 32 in store  # the page sees its own records
        raise RuntimeError("the spool could not be synced")
    assert "1" * 32 not in store and store.channel(FP_A).highest == 0
    with store.page():
        store.record(FP_A, inner("1" * 32, 1), now)
        store.record(FP_A, inner("2" * 32, 2), now)
        other = ChannelDB(tmp_path)  # another reader of the identity (talk status, say)
        assert "1" * 32 not in other  # nothing is taken before the page is durable
        other.close()
    other = ChannelDB(tmp_path)
    assert "1" * 32 in other and "2" * 32 in other and other.channel(FP_A).highest == 2
    other.close()
    store.close()
