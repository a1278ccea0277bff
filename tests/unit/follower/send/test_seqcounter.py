"""follower.send.seqcounter: the numbers a sender gives its messages, per contact."""

from __future__ import annotations

import json
import multiprocessing
import sqlite3
from pathlib import Path

import pytest

from durable.boot import boot_id
from durable.errors import UserError
from durable.slots import MAGIC
from follower.send import outbox as outbox_mod
from follower.send.outbox import Outbox
from follower.send.seqcounter import COUNTER_FILE, LEGACY_DB, LIVE_FILE, move_past, next_seq
from tests.power_loss import Disks

FP_A = "a" * 32
FP_B = "b" * 32


def take(folder: Path, peer: str) -> int:
    with next_seq(folder, peer) as seq:
        return seq


def test_a_number_is_used_up_only_when_the_message_seals(tmp_path: Path) -> None:
    assert take(tmp_path, FP_B) == 1
    with pytest.raises(ValueError), next_seq(tmp_path, FP_B):
        raise ValueError("too large to seal")
    assert take(tmp_path, FP_B) == 2
    assert take(tmp_path, FP_A) == 1  # one count per peer
    assert (tmp_path / COUNTER_FILE).stat().st_mode & 0o777 == 0o600


def _take_numbers(folder: str, count: int, out: multiprocessing.Queue[int]) -> None:
    for _ in range(count):
        out.put(take(Path(folder), FP_B))


def test_concurrent_processes_never_share_a_number(tmp_path: Path) -> None:
    ctx = multiprocessing.get_context("spawn")
    out: multiprocessing.Queue[int] = ctx.Queue()
    procs = [ctx.Process(target=_take_numbers, args=(str(tmp_path), 25, out)) for _ in range(4)]
    for p in procs:
        p.start()
    numbers = [out.get(timeout=60) for _ in range(100)]
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    assert sorted(numbers) == list(range(1, 101))


def legacy_store(folder: Path, counts: dict[str, int]) -> None:
    """A channel store as earlier versions left it, with their send counts in it."""
    db = sqlite3.connect(folder / LEGACY_DB)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("CREATE TABLE sent_seq (peer TEXT PRIMARY KEY, last INTEGER NOT NULL)")
    db.executemany("INSERT INTO sent_seq VALUES (?, ?)", counts.items())
    db.commit()
    db.close()


def test_counts_kept_by_an_earlier_version_go_on(tmp_path: Path) -> None:
    legacy_store(tmp_path, {FP_A: 41, FP_B: 7})
    assert take(tmp_path, FP_A) == 42
    assert take(tmp_path, FP_B) == 8
    # Read once: from now on the counter file is what counts.
    (tmp_path / LEGACY_DB).unlink()
    assert take(tmp_path, FP_A) == 43


def test_a_channel_store_without_counts_starts_at_one(tmp_path: Path) -> None:
    db = sqlite3.connect(tmp_path / LEGACY_DB)
    db.execute("CREATE TABLE seen (id TEXT PRIMARY KEY, at REAL NOT NULL)")
    db.commit()
    db.close()
    assert take(tmp_path, FP_A) == 1


@pytest.mark.parametrize("content", [b"{not json", b'{"' + FP_A.encode() + b'": "7"}', b"[1, 2]"])
def test_a_damaged_counter_refuses_to_send_and_is_left_as_it_was(tmp_path: Path, content: bytes) -> None:
    """Guessing a number could reuse one, which the peer refuses as a replay: the user is told."""
    (tmp_path / COUNTER_FILE).write_bytes(content)
    with pytest.raises(UserError, match="restore it from a backup"):
        take(tmp_path, FP_A)
    assert (tmp_path / COUNTER_FILE).read_bytes() == content


def test_a_refusal_of_a_reused_number_moves_the_count_past_it_never_back(tmp_path: Path) -> None:
    for _ in range(3):
        take(tmp_path, FP_B)
    assert move_past(tmp_path, FP_B, 40)
    assert take(tmp_path, FP_B) == 41
    assert not move_past(tmp_path, FP_B, 10)  # an older, lower word: the count stays
    assert not move_past(tmp_path, FP_B, 41)
    assert take(tmp_path, FP_B) == 42
    assert move_past(tmp_path, FP_A, 5) and take(tmp_path, FP_A) == 6  # a contact not yet counted


def test_moving_past_refuses_a_damaged_count_like_a_send(tmp_path: Path) -> None:
    (tmp_path / COUNTER_FILE).write_text('{"' + FP_B + '": "seven"}')
    with pytest.raises(UserError, match="damaged"):
        move_past(tmp_path, FP_B, 40)


def send_recorded(folder: Path, peer: str) -> int:
    """A number taken as a send with an outbox takes it: the count unsynced, the outbox's
    record of the message (synced) carrying it."""
    with next_seq(folder, peer, recorded=True) as seq:
        pass
    Outbox(folder).sent(f"m{seq}{peer[:4]}", peer, "bob", "chat", "hi", "tag", "blob", seq=seq)
    return seq


def test_a_recorded_count_is_not_synced_and_a_kill_loses_nothing(tmp_path: Path) -> None:
    """Killed anywhere (the kernel keeps what was written), the next send numbers on: between
    the count and the outbox too, where the number was taken but never left."""
    assert [send_recorded(tmp_path, FP_B) for _ in range(3)] == [1, 2, 3]
    with next_seq(tmp_path, FP_B, recorded=True):
        pass  # killed here: counted, not in the outbox
    assert send_recorded(tmp_path, FP_B) == 5


@pytest.fixture
def disk(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Disks:
    (tmp_path / "id").mkdir()
    return Disks(monkeypatch, tmp_path / "disks").watch(tmp_path / "id")


def test_after_a_power_loss_no_number_the_outbox_kept_is_given_again(tmp_path: Path, disk: Disks) -> None:
    folder = tmp_path / "id"
    take(folder, FP_A)  # synced: no outbox
    sent = [send_recorded(folder, FP_B) for _ in range(4)]
    disk.lose_power(folder)  # the unsynced counts are gone; the outbox's records are not
    assert send_recorded(folder, FP_B) == sent[-1] + 1
    assert take(folder, FP_A) == 2
    disk.lose_power(folder)
    assert send_recorded(folder, FP_B) == sent[-1] + 2


def test_a_torn_live_count_after_a_power_loss_is_read_from_the_outbox(tmp_path: Path, disk: Disks) -> None:
    folder = tmp_path / "id"
    sent = [send_recorded(folder, FP_B) for _ in range(3)]
    disk.lose_power(folder)
    (folder / LIVE_FILE).write_bytes(b'{"boot": "x", "cou')  # what a crash may leave of it
    assert send_recorded(folder, FP_B) == sent[-1] + 1


def test_live_counts_torn_in_both_slots_are_read_from_the_outbox(tmp_path: Path, disk: Disks) -> None:
    folder = tmp_path / "id"
    sent = [send_recorded(folder, FP_B) for _ in range(3)]
    live = folder / LIVE_FILE
    assert live.read_bytes().startswith(MAGIC)  # laid out in slots, written in place since
    disk.lose_power(folder)
    torn = bytearray(live.read_bytes())
    size = (len(torn) - 12) // 2
    for slot in (0, 1):
        torn[12 + slot * size + 30] ^= 0xFF
    live.write_bytes(bytes(torn))
    assert send_recorded(folder, FP_B) == sent[-1] + 1


def test_the_live_count_is_rewritten_in_place(tmp_path: Path) -> None:
    """No new file renamed over the old one on every send (the file system flushes such a file)."""
    send_recorded(tmp_path, FP_B)
    inode = (tmp_path / LIVE_FILE).stat().st_ino
    assert [send_recorded(tmp_path, FP_B) for _ in range(5)] == [2, 3, 4, 5, 6]
    assert (tmp_path / LIVE_FILE).stat().st_ino == inode


def test_a_live_count_an_earlier_version_wrote_whole_in_this_boot_is_counted_on(tmp_path: Path) -> None:
    """Upgraded between two sends, without a reboot: its count is the newest, so it is used."""
    (tmp_path / LIVE_FILE).write_text(json.dumps({"boot": boot_id(), "counts": {FP_B: 41}}))
    assert send_recorded(tmp_path, FP_B) == 42
    assert send_recorded(tmp_path, FP_B) == 43


def test_a_compacted_outbox_keeps_the_highest_numbers(
        tmp_path: Path, disk: Disks, monkeypatch: pytest.MonkeyPatch) -> None:
    """Compaction moves settled messages out of the working log: their numbers stay in it."""
    folder = tmp_path / "id"
    box = Outbox(folder)
    sent = [send_recorded(folder, FP_B) for _ in range(5)]
    box.receipts([(f"m{seq}{FP_B[:4]}", "delivered", "") for seq in sent])  # settled
    monkeypatch.setattr(outbox_mod, "COMPACT_BYTES", 10)
    box.receipts([("nothing", "delivered", "")])  # crosses the limit: compacted
    assert b'"ev":"compacted"' in box.path.read_bytes().splitlines()[0]
    assert box.highest_seqs() == {FP_B: sent[-1]}
    disk.lose_power(folder)
    assert send_recorded(folder, FP_B) == sent[-1] + 1
