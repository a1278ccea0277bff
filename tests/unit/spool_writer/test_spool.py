"""spool_writer.spool: whole lines, rotation, dedup by id, and surviving SIGKILL anywhere."""

from __future__ import annotations

import json
import os
import random
import re
import select
import signal
import stat
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import pytest

from spool_writer import lines
from spool_writer.cursor import message_of
from spool_writer.index import DeliveredIndex
from spool_writer.layout import oldest_first
from spool_writer.record import SpoolRecord
from spool_writer.sessions import register
from spool_writer.spool import Spool
from tests.conftest import REPO
from tests.unit.spool_writer.writers import PAGE, killed_writer

ENV = {**os.environ, "PYTHONPATH": str(REPO)}
WRITERS = "tests.unit.spool_writer.writers"

def message(msg_id: str, text: str = "hello") -> SpoolRecord:
    return {"id": msg_id, "from": "a" * 32, "name": "alice", "text": text,
            "ts": "2024-01-01T00:00:00Z", "kind": "chat"}


def all_lines(spool_file: Path) -> list[dict[str, Any]]:
    """Every line of a spool, all generations, oldest first; each must be a JSON object."""
    return [json.loads(line) for path in oldest_first(spool_file) for line in lines.read_lines(path)]


def read_as_agents_do(spool_file: Path) -> list[SpoolRecord]:
    """The messages of a spool, all generations, as an agent's reader takes them
    (`spool_writer.cursor.message_of`). A writer killed inside a write leaves a torn line, which
    the next append seals into a line of its own; readers skip it. Only such a line may be
    skipped, and a message it started must come whole after it (delivered again)."""
    raw = [line for path in oldest_first(spool_file) for line in lines.read_lines(path)]
    for at, line in enumerate(raw):
        if message_of(line) is None:
            started = re.match(rb'\{"id": "([^"]+)"', line)
            later = {r["id"] for w in raw[at + 1:] if (r := message_of(w)) is not None}
            assert started is None or started[1].decode() in later, f"a torn line never made whole: {line!r}"
    return [r for line in raw if (r := message_of(line)) is not None]


@pytest.fixture
def hosts() -> Iterator[list[subprocess.Popen[bytes]]]:
    """Stand-ins for agent host programs: real processes, killed at the end."""
    procs: list[subprocess.Popen[bytes]] = []
    yield procs
    for p in procs:
        p.kill()
        p.wait()


def start_host(hosts: list[subprocess.Popen[bytes]]) -> int:
    p = subprocess.Popen(["sleep", "60"])
    hosts.append(p)
    return p.pid


def test_deliver_appends_one_line_with_the_received_time(tmp_path: Path) -> None:
    spool = Spool(tmp_path / "spool")
    assert spool.deliver(message("m1", "héllo\nworld"))
    raw = (tmp_path / "spool" / "inbox.ndjson").read_bytes()
    assert raw.count(b"\n") == 1 and "héllo".encode() in raw  # one line, not ASCII-escaped
    line = json.loads(raw)
    assert {k: line[k] for k in message("m1")} == message("m1", "héllo\nworld")
    assert line["received"].endswith("Z") and line["received"][:2] == "20"


def test_spool_files_are_private(tmp_path: Path) -> None:
    Spool(tmp_path / "spool").deliver(message("m1"))
    root = tmp_path / "spool"
    for path in (root, root / "sessions"):
        assert stat.S_IMODE(path.stat().st_mode) == 0o700
    for path in (root / "inbox.ndjson", root / "delivered.log", root / ".lock"):
        assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_an_id_delivered_before_is_not_written_again(tmp_path: Path) -> None:
    spool = Spool(tmp_path / "spool")
    assert not spool.knows("m1")
    assert spool.deliver(message("m1")) is True
    assert spool.deliver(message("m1", "a replay")) is False
    assert Spool(tmp_path / "spool").knows("m1")  # another writer (process) sees it too
    assert [r["text"] for r in all_lines(tmp_path / "spool" / "inbox.ndjson")] == ["hello"]


@pytest.mark.parametrize(
    "bad", [{"id": "m1"}, {**message("x"), "id": "two words"}, {**message("x"), "id": 7}]
)
def test_a_record_that_is_not_a_message_is_refused(tmp_path: Path, bad: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        # Not a SpoolRecord on purpose: what `deliver` must refuse at run time.
        Spool(tmp_path / "spool").deliver(cast(SpoolRecord, bad))
    assert not (tmp_path / "spool" / "inbox.ndjson").exists()


def test_rotation_keeps_generations_newest_first_and_drops_the_oldest(tmp_path: Path) -> None:
    spool = Spool(tmp_path / "spool", max_bytes=1, generations=2)  # every line starts a new file
    for i in range(5):
        spool.deliver(message(f"m{i}"))
    inbox = tmp_path / "spool" / "inbox.ndjson"
    assert [p.name for p in oldest_first(inbox)] == ["inbox.ndjson.2", "inbox.ndjson.1", "inbox.ndjson"]
    assert [r["id"] for r in all_lines(inbox)] == ["m2", "m3", "m4"]


def test_a_torn_last_line_is_sealed_into_a_line_of_its_own_before_the_next_append(tmp_path: Path) -> None:
    spool = Spool(tmp_path / "spool")
    spool.deliver(message("m1"))
    inbox = tmp_path / "spool" / "inbox.ndjson"
    with open(inbox, "ab") as f:
        f.write(b'{"id": "m2", "te')  # what power loss can leave of a write
    spool.deliver(message("m3"))
    raw = lines.read_lines(inbox)
    assert raw[1] == b'{"id": "m2", "te\n'  # kept, alone: it swallows nothing
    assert [json.loads(line)["id"] for line in (raw[0], raw[2])] == ["m1", "m3"]
    assert inbox.read_bytes().endswith(b"\n")


def test_eight_processes_appending_at_once_lose_and_tear_nothing(tmp_path: Path) -> None:
    root = tmp_path / "spool"
    writers = [subprocess.Popen([sys.executable, "-m", WRITERS, str(root), f"w{n}", "1000", "65536", "1000"],
                                env=ENV, stdout=subprocess.DEVNULL) for n in range(8)]
    assert [w.wait(timeout=300) for w in writers] == [0] * 8
    inbox = root / "inbox.ndjson"
    assert len(oldest_first(inbox)) > 5  # rotated several times, nothing dropped
    records = all_lines(inbox)  # json.loads raises on any torn or fused line
    ids = [r["id"] for r in records]
    assert len(ids) == 8000 and len(set(ids)) == 8000
    for n in range(8):  # each writer's lines stay in its order across generations
        assert [int(i.split("-")[1]) for i in ids if i.startswith(f"w{n}-")] == list(range(1000))


def again(tag: str, i: int) -> SpoolRecord:
    return {"id": f"{tag}-{i}", "from": "f" * 32, "name": "x", "text": "again",
            "ts": "2024-01-01T00:00:00Z", "kind": "chat"}


def assert_each_once(root: Path, parent: Spool, expected: list[str]) -> None:
    for sid in ("a", "b"):
        counts = Counter(r["id"] for r in read_as_agents_do(root / "sessions" / f"{sid}.ndjson"))
        assert counts == Counter(expected), f"session {sid}: {counts - Counter(expected)}"
    assert not (root / "inbox.ndjson").exists()
    assert all(parent.knows(i) for i in expected)


def test_sigkill_anywhere_in_deliver_then_redelivery_leaves_each_id_once(
    tmp_path: Path, hosts: list[subprocess.Popen[bytes]]
) -> None:
    root = tmp_path / "spool"
    for sid in ("a", "b"):  # two targets: a kill can fall between their writes
        register(root, "claude", sid, start_host(hosts))
    parent = Spool(root, max_bytes=4096, generations=10_000)
    rng = random.Random(7)
    expected: list[str] = []
    for rnd in range(30):
        for i in range(killed_writer(root, f"r{rnd}", 4096, 1, rng)):
            parent.deliver(again(f"r{rnd}", i))
            expected.append(f"r{rnd}-{i}")
    assert len(expected) > 30
    assert_each_once(root, parent, expected)


def test_sigkill_anywhere_in_a_batch_then_redelivery_of_the_page_leaves_each_id_once(
    tmp_path: Path, hosts: list[subprocess.Popen[bytes]]
) -> None:
    """What a follower does after a kill: the whole unacked page comes again, in a batch."""
    root = tmp_path / "spool"
    for sid in ("a", "b"):
        register(root, "claude", sid, start_host(hosts))
    parent = Spool(root, max_bytes=8192, generations=10_000)
    rng = random.Random(11)
    expected: list[str] = []
    for rnd in range(20):
        started = killed_writer(root, f"r{rnd}", 8192, PAGE, rng)
        page_end = -(-started // PAGE) * PAGE  # the page in flight comes whole
        with parent.batch():
            for i in range(page_end):
                parent.deliver(again(f"r{rnd}", i))
        expected += [f"r{rnd}-{i}" for i in range(page_end)]
    assert_each_once(root, parent, expected)


def test_a_batch_cut_short_across_a_rotation_is_written_once_when_the_page_comes_again(
    tmp_path: Path, hosts: list[subprocess.Popen[bytes]]
) -> None:
    """The page's first lines went to the generation the batch rotated away, its last ones to the
    new file; none reached the index. The page coming again must find the first ones too."""
    root = tmp_path / "spool"
    register(root, "claude", "a", start_host(hosts))
    first = Spool(root, max_bytes=1024, generations=100)
    page = [f"p{i}" for i in range(20)]
    with pytest.raises(RuntimeError), first.batch():
        for msg_id in page:
            first.deliver(message(msg_id, "x" * 100))
        raise RuntimeError("the process dies before the batch ends")
    assert len(oldest_first(root / "sessions" / "a.ndjson")) > 2  # the page spans rotations
    again_spool = Spool(root, max_bytes=1024, generations=100)
    with again_spool.batch():
        for msg_id in page:
            again_spool.deliver(message(msg_id, "again"))
    counts = Counter(r["id"] for r in all_lines(root / "sessions" / "a.ndjson"))
    assert counts == Counter(page)
    assert all(again_spool.knows(i) for i in page)


def count_syncs(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The fdatasync calls made from here on (their fds), by wrapping the real call."""
    calls: list[int] = []
    real = os.fdatasync

    def counted(fd: int) -> None:
        calls.append(fd)
        real(fd)

    monkeypatch.setattr(os, "fdatasync", counted)
    return calls


def test_a_batch_syncs_each_file_once_and_writes_the_index_last(
    tmp_path: Path, hosts: list[subprocess.Popen[bytes]], monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "spool"
    for sid in ("a", "b"):
        register(root, "claude", sid, start_host(hosts))
    spool = Spool(root)
    spool.deliver(message("warm"))  # files exist: no first-write folder syncs below
    syncs = count_syncs(monkeypatch)
    index = root / "delivered.log"
    with spool.batch():
        for n in range(20):
            assert spool.deliver(message(f"p{n}"))
        assert not spool.deliver(message("p3"))  # a repeat inside the page is still caught
        assert b"p19" not in index.read_bytes()  # the ids wait until the lines are synced
        assert len(all_lines(root / "sessions" / "a.ndjson")) == 21  # readers see lines at once
        assert syncs == []
    assert len(syncs) == 3  # two spool files, then the index
    assert all(f"p{n}".encode() in index.read_bytes() for n in range(20))
    syncs.clear()
    for n in range(5):
        spool.deliver(message(f"one{n}"))
    assert len(syncs) == 15  # outside a batch: every line and every id, one by one


def test_a_page_costs_each_id_once_not_once_per_later_delivery(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each delivery catches the view up; a batch's ids already in it are not applied again."""
    spool = Spool(tmp_path / "spool")
    applied: list[str] = []
    apply = DeliveredIndex._apply

    def counted(self: DeliveredIndex, entry: tuple[int, str, str | None]) -> None:
        applied.append(entry[1])
        apply(self, entry)

    monkeypatch.setattr(DeliveredIndex, "_apply", counted)
    with spool.batch():
        for n in range(100):
            assert spool.deliver(message(f"p{n}"))
    assert Counter(applied) == Counter(f"p{n}" for n in range(100))


@pytest.mark.parametrize("how", ["removed", "compacted"])
def test_a_batch_keeps_knowing_its_ids_when_the_log_is_read_anew(tmp_path: Path, how: str) -> None:
    root = tmp_path / "spool"
    spool = Spool(root)
    spool.deliver(message("before"))
    index = root / "delivered.log"
    with spool.batch():
        assert spool.deliver(message("b1"))
        if how == "removed":
            index.unlink()
        else:  # another process rewrote it: a new file, the view starts over from it
            other = DeliveredIndex(index)
            other.refresh()
            other.compact()
        assert not spool.deliver(message("b1"))  # still a repeat inside the page
        assert spool.deliver(message("b2"))
    assert spool.knows("b1") and spool.knows("b2")
    assert [r["id"] for r in all_lines(root / "inbox.ndjson")] == ["before", "b1", "b2"]


def test_a_failed_batch_leaves_nothing_marked_and_redelivers_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "spool"
    spool = Spool(root)
    with pytest.raises(RuntimeError), spool.batch():
        spool.deliver(message("x1"))
        spool.deliver(message("x2"))
        raise RuntimeError("the page's handling failed")
    assert not spool.knows("x1")  # the ids were never written: memory forgot them too
    with spool.batch():
        spool.deliver(message("x1"))  # its line is there (found at the file's end): not again
        assert spool.deliver(message("x3"))
    assert [r["id"] for r in all_lines(root / "inbox.ndjson")] == ["x1", "x2", "x3"]
    assert spool.knows("x1") and spool.knows("x3")


def test_a_delivery_whose_index_write_failed_is_not_written_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The writer remembers each file's end to skip looking at it; a delivery that failed after
    its line was written (a full disk at the index) must make it look again."""
    root = tmp_path / "spool"
    spool = Spool(root)
    assert spool.deliver(message("f1"))

    def full(msg_id: str) -> None:
        raise OSError(28, "No space left on device")

    with monkeypatch.context() as patched:
        patched.setattr(spool.index, "mark_delivered", full)
        with pytest.raises(OSError):
            spool.deliver(message("f2"))  # its line is written, the index lacks it
    assert spool.deliver(message("f2"))  # found at the file's end: completed, not repeated
    assert spool.deliver(message("f3"))
    assert [r["id"] for r in all_lines(root / "inbox.ndjson")] == ["f1", "f2", "f3"]


@pytest.mark.parametrize("batched", [False, True])
def test_a_line_another_writer_left_after_ours_is_found(tmp_path: Path, batched: bool) -> None:
    """A writer killed after its line and before the index, between two of our deliveries:
    the file no longer ends as we left it, so its end is read, and the line not written twice."""
    root = tmp_path / "spool"
    spool = Spool(root)
    with spool.batch():
        assert spool.deliver(message("o1"))
    inbox = root / "inbox.ndjson"
    with inbox.open("ab") as f:
        f.write(lines.encode(message("o2")))
    if batched:
        with spool.batch():
            spool.deliver(message("o2"))
            assert spool.deliver(message("o3"))
    else:
        spool.deliver(message("o2"))
        assert spool.deliver(message("o3"))
    assert [r["id"] for r in all_lines(inbox)] == ["o1", "o2", "o3"]
    assert spool.knows("o2")


def test_knows_sees_what_another_writer_delivered_and_compacted(tmp_path: Path) -> None:
    """`knows` skips the lock while the index is as this writer last read it; another writer's
    delivery, or its compaction of the index, must be seen all the same."""
    root = tmp_path / "spool"
    mine, other = Spool(root), Spool(root)
    assert mine.deliver(message("k1"))
    assert not other.knows("k2") and not mine.knows("k2")
    assert other.deliver(message("k2"))
    assert mine.knows("k2")
    assert not mine.knows("k3")
    with other.batch():
        other.deliver(message("k3"))
        assert not mine.knows("k3")  # not in the index until the batch is durable
    assert mine.knows("k3")
    other.index.compact(time.time())  # rewritten whole: a new file in its place
    assert other.deliver(message("k4"))
    assert mine.knows("k4") and mine.knows("k1")
    assert mine.deliver(message("k4")) is False


def test_a_batch_that_delivers_nothing_needs_no_spool_folder_yet(tmp_path: Path) -> None:
    """A page of receipts only, taken before any mail (or after the folder was removed), ends
    its batch without an error: the next page of mail is not held up by it."""
    root = tmp_path / "spool"
    spool = Spool(root)
    with spool.batch():
        pass
    with spool.batch():
        assert spool.deliver(message("m1"))
    assert [r["id"] for r in all_lines(root / "inbox.ndjson")] == ["m1"]


def test_a_batch_that_rotates_a_file_keeps_every_line(tmp_path: Path) -> None:
    root = tmp_path / "spool"
    spool = Spool(root, max_bytes=1000, generations=100)
    with spool.batch():
        for n in range(40):
            spool.deliver(message(f"r{n}", "x" * 100))
    assert [r["id"] for r in all_lines(root / "inbox.ndjson")] == [f"r{n}" for n in range(40)]
    assert len(oldest_first(root / "inbox.ndjson")) > 3


def test_a_delivery_cut_short_after_one_target_is_completed_not_repeated(
    tmp_path: Path, hosts: list[subprocess.Popen[bytes]]
) -> None:
    root = tmp_path / "spool"
    for sid in ("a", "b"):
        register(root, "codex", sid, start_host(hosts))
    a, b = root / "sessions" / "a.ndjson", root / "sessions" / "b.ndjson"
    a.write_bytes(lines.encode(message("m1")))  # as a kill after a's write, before b's and the index
    spool = Spool(root)
    assert spool.deliver(message("m2"))  # lands after m1 in a: m1 is no longer a's last line
    assert spool.deliver(message("m1"))
    assert spool.deliver(message("m1")) is False
    assert [r["id"] for r in all_lines(a)] == ["m1", "m2"]
    assert [r["id"] for r in all_lines(b)] == ["m2", "m1"]


def test_the_index_forgets_only_ids_older_than_it_keeps(tmp_path: Path) -> None:
    path = tmp_path / "delivered.log"
    old = int(time.time()) - 80 * 86400  # past 60 days, and past the 15-day slack
    path.write_bytes(b"".join(f"{old}\told{i}\n".encode() for i in range(10)))
    index = DeliveredIndex(path, compact_at=12)
    index.refresh()
    assert index.delivered("old3")
    for i in range(3):  # 13 lines > compact_at: rewritten with what is younger than 60 days
        index.mark_delivered(f"new{i}")
    other = DeliveredIndex(path)
    other.refresh()
    for view in (index, other):
        assert not view.delivered("old3")
        assert all(view.delivered(f"new{i}") for i in range(3))
    assert len(path.read_bytes().splitlines()) == 3


# `talk log`, run as a real process against an identity in a temporary TALK_HOME.

TALK = str(Path(sys.executable).with_name("talk"))


def talk_env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TALK_")}
    env.update(TALK_HOME=str(home), PYTHONPATH=str(REPO))
    return env


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """An identity `bob`; its keys cannot be published (no relay), which `talk log` never needs."""
    home = tmp_path / "home"
    r = subprocess.run([TALK, "init", "bob", "--no-passphrase", "--relay", "http://127.0.0.1:9"],
                       capture_output=True, text=True, env=talk_env(home), timeout=30)
    assert r.returncode == 3 and (home / "bob" / "identity.json").exists(), r.stderr
    return home


def test_talk_log_shows_each_message_once_in_order(home: Path, hosts: list[subprocess.Popen[bytes]]) -> None:
    root = home / "bob" / "spool"
    spool = Spool(root)
    spool.deliver(message("m1", "first"))  # to the inbox; s1 takes it over
    register(root, "claude", "s1", start_host(hosts))
    register(root, "codex", "s2", start_host(hosts))
    spool.deliver(message("m2", "second\nline"))  # a copy in each session
    r = subprocess.run([TALK, "log"], capture_output=True, text=True, env=talk_env(home), timeout=30)
    assert r.returncode == 0, r.stderr
    shown = r.stdout.splitlines()
    assert len(shown) == 3 and shown[2] == "    line"  # a text's later lines are indented
    assert [s[19:] for s in shown[:2]] == ["  m1  alice: first", "  m2  alice: second"]  # the id to forward
    assert all(s[:2] == "20" and s[10] == " " for s in shown[:2])  # after the local date and time
    r = subprocess.run([TALK, "log", "--session", "s2"], capture_output=True, text=True,
                       env=talk_env(home), timeout=30)
    assert r.stdout.count("alice:") == 1 and "second" in r.stdout
    r = subprocess.run([TALK, "log", "--session", "nope"], capture_output=True, text=True,
                       env=talk_env(home), timeout=30)
    assert r.returncode == 1 and "talk session list" in r.stderr


def read_line(proc: subprocess.Popen[bytes], timeout: float) -> bytes:
    """One line of the process's output, or b"" if none comes in time (without blocking forever)."""
    assert proc.stdout is not None
    fd, got, deadline = proc.stdout.fileno(), b"", time.monotonic() + timeout
    while not got.endswith(b"\n"):
        ready, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
        if not ready:
            return b""
        byte = os.read(fd, 1)
        if not byte:
            return got
        got += byte
    return got


def test_talk_log_follow_prints_new_mail_and_ctrl_c_exits_0(home: Path) -> None:
    spool = Spool(home / "bob" / "spool")
    spool.deliver(message("m1", "before"))
    proc = subprocess.Popen([TALK, "log", "--follow"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=talk_env(home))
    try:
        assert read_line(proc, 15).endswith(b"alice: before\n")
        spool.deliver(message("m2", "while following"))
        assert read_line(proc, 5).endswith(b"alice: while following\n")
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=10) == 0
    finally:
        proc.kill()
        proc.communicate()


def test_a_large_line_left_by_a_crash_is_found_and_not_written_twice(tmp_path: Path) -> None:
    big = message("m1", "x" * 300_000)  # the tail is searched backwards in chunks
    inbox = tmp_path / "spool" / "inbox.ndjson"
    inbox.parent.mkdir(parents=True)
    inbox.write_bytes(lines.encode(big))  # as a kill after the write, before the index
    spool = Spool(tmp_path / "spool")
    assert spool.deliver(big) is True  # completes the delivery: this call made it whole
    assert spool.deliver(big) is False
    assert [r["id"] for r in all_lines(inbox)] == ["m1"]
