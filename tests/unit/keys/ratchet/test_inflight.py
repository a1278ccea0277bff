"""keys.ratchet.inflight: a ratchet message's inner envelope, sealed at rest, bounded, dropped."""

from __future__ import annotations

from pathlib import Path

from durable.ndjson import json_lines, read_records
from keys.envelope import Inner, new_message
from keys.identity import Identity
from keys.ratchet.envelope import plaintext_of
from keys.ratchet.inflight import INFLIGHT_FILE, Inflight, Keeping
from tests.unit.samples import secret_forms


def message(identity: Identity, text: str, n: int | None = None) -> Inner:
    inner = new_message(identity.fingerprint, identity.fingerprint, text)
    return inner if n is None else inner._replace(id=f"{n:032x}")


def test_a_kept_message_comes_back_whole_and_is_sealed_at_rest(tmp_path: Path, alice_id: Identity,
                                                               bob_id: Identity) -> None:
    inner = new_message(alice_id.fingerprint, bob_id.fingerprint, "the whole text " * 40, seq=7)
    Inflight(tmp_path, alice_id).keep(inner, plaintext_of(inner))
    stored = (tmp_path / INFLIGHT_FILE).read_bytes()
    assert b"the whole text" not in stored
    assert not any(form in stored for form in secret_forms(alice_id))
    assert (tmp_path / INFLIGHT_FILE).stat().st_mode & 0o777 == 0o600
    assert Inflight(tmp_path, alice_id).take(inner.id) == inner
    assert Inflight(tmp_path, bob_id).take(inner.id) is None  # another identity's key opens nothing


def test_drop_forgets_and_unknown_or_bad_ids_are_none(tmp_path: Path, alice_id: Identity) -> None:
    store = Inflight(tmp_path, alice_id)
    store.drop(["0" * 32])  # nothing kept yet: no file is made for it
    assert not (tmp_path / INFLIGHT_FILE).exists()
    inner, other = message(alice_id, "hi"), message(alice_id, "there")
    store.keep(inner, plaintext_of(inner))
    store.keep(other, plaintext_of(other))
    store.drop([inner.id, "../../etc/passwd"])
    assert store.take(inner.id) is None and store.take("../x") is None and store.take(other.id) == other
    store.keep(inner, plaintext_of(inner))  # sealed again, in a new session: kept again
    assert store.take(inner.id) == inner


def test_damaged_lines_and_a_torn_tail_read_as_not_kept_and_harm_nothing_else(
        tmp_path: Path, alice_id: Identity) -> None:
    store = Inflight(tmp_path, alice_id)
    good, bad = message(alice_id, "good"), message(alice_id, "bad")
    store.keep(good, plaintext_of(good))
    with (tmp_path / INFLIGHT_FILE).open("a") as f:
        f.write(f'{{"id": "{bad.id}", "box": "not base64!"}}\n[1, 2]\n{{"drop": "x"}}\n')
        f.write(f'{{"id": "{"f" * 32}", "bo')  # a line cut short by a kill
    later = message(alice_id, "later")
    store.keep(later, plaintext_of(later))  # seals the torn tail first
    assert store.take(bad.id) is None and store.take(good.id) == good and store.take(later.id) == later


def test_past_twice_the_budget_the_log_keeps_the_newest_that_fit(tmp_path: Path, alice_id: Identity) -> None:
    store = Inflight(tmp_path, alice_id, keep_bytes=16 * 1024)
    kept = []
    for n in range(200):
        inner = message(alice_id, "x" * 300, n)
        store.keep(inner, plaintext_of(inner))
        kept.append(inner)
        if n % 3 == 0:
            store.drop([inner.id])  # settled
        assert (tmp_path / INFLIGHT_FILE).stat().st_size <= 2 * store.keep_bytes
    held = [i for i in kept if store.take(i.id) is not None]
    live = [i for i in kept if int(i.id, 16) % 3 != 0]
    assert 0 < len(held) < len(live) and held == live[-len(held):]  # the oldest went first
    huge = message(alice_id, "c" * 20_000)
    store.keep(huge, plaintext_of(huge))  # larger than the whole budget: not kept
    assert store.take(huge.id) is None and store.take(kept[-1].id) == kept[-1]


def boxes(path: Path) -> list[str]:
    return [r["box"] for r in read_records(path) if "box" in r]


def test_a_dropped_message_is_erased_from_the_files_bytes_not_marked(
        tmp_path: Path, alice_id: Identity) -> None:
    store = Inflight(tmp_path, alice_id)
    settled, open_ = message(alice_id, "settled"), message(alice_id, "still on its way")
    store.keep(settled, plaintext_of(settled))
    store.keep(open_, plaintext_of(open_))
    [gone, _] = boxes(tmp_path / INFLIGHT_FILE)
    store.drop([settled.id])
    data = (tmp_path / INFLIGHT_FILE).read_bytes()
    assert gone.encode() not in data and settled.id.encode() not in data
    assert store.take(settled.id) is None and store.take(open_.id) == open_


def test_past_its_window_a_message_is_not_taken_and_the_next_append_erases_it(
        tmp_path: Path, alice_id: Identity) -> None:
    old, new = message(alice_id, "old"), message(alice_id, "new")
    Inflight(tmp_path, alice_id).keep(old, plaintext_of(old))
    [old_box] = boxes(tmp_path / INFLIGHT_FILE)
    later = Inflight(tmp_path, alice_id, window=-1.0)  # as seen once the window has passed
    assert later.take(old.id) is None
    Inflight(tmp_path, alice_id).take(old.id)  # reading erases nothing
    assert old_box.encode() in (tmp_path / INFLIGHT_FILE).read_bytes()
    later.keep(new, plaintext_of(new))
    assert old_box.encode() not in (tmp_path / INFLIGHT_FILE).read_bytes()
    assert Inflight(tmp_path, alice_id).take(old.id) is None


def test_a_line_an_earlier_version_wrote_without_a_time_is_not_taken_and_is_erased(
        tmp_path: Path, alice_id: Identity) -> None:
    store = Inflight(tmp_path, alice_id)
    earlier = message(alice_id, "from before")
    store.keep(earlier, plaintext_of(earlier))
    [record] = read_records(tmp_path / INFLIGHT_FILE)
    (tmp_path / INFLIGHT_FILE).write_bytes(json_lines([{"id": record["id"], "box": record["box"]},
                                                       {"drop": ["0" * 32]}]))
    assert store.take(earlier.id) is None
    store.drop(["1" * 32])  # any drop rewrites a log that holds such a line
    assert record["box"].encode() not in (tmp_path / INFLIGHT_FILE).read_bytes()


def test_a_sweep_erases_only_what_is_past_its_window(tmp_path: Path, alice_id: Identity) -> None:
    Inflight(tmp_path, alice_id).sweep()  # no log yet: nothing made
    assert not (tmp_path / INFLIGHT_FILE).exists()
    inner = message(alice_id, "on its way")
    Inflight(tmp_path, alice_id).keep(inner, plaintext_of(inner))
    before = (tmp_path / INFLIGHT_FILE).read_bytes()
    Inflight(tmp_path, alice_id).sweep()
    assert (tmp_path / INFLIGHT_FILE).read_bytes() == before
    Inflight(tmp_path, alice_id, window=-1.0).sweep()  # as once the window passed
    assert (tmp_path / INFLIGHT_FILE).read_bytes() == b""


def test_a_log_replaced_or_removed_between_appends_gets_the_next_one(tmp_path: Path,
                                                                    alice_id: Identity) -> None:
    # The log stays open between appends: one replaced (a rewrite elsewhere) or removed must not
    # take the next message into a file that no longer has a name.
    store = Inflight(tmp_path, alice_id)
    first, second, third = message(alice_id, "first"), message(alice_id, "second"), message(alice_id, "third")
    store.keep(first, plaintext_of(first))
    Inflight(tmp_path, alice_id).drop([first.id])  # another instance rewrites it
    store.keep(second, plaintext_of(second))
    assert Inflight(tmp_path, alice_id).take(second.id) == second
    (tmp_path / INFLIGHT_FILE).unlink()
    store.keep(third, plaintext_of(third))
    assert [r["id"] for r in read_records(tmp_path / INFLIGHT_FILE)] == [third.id]
    assert Inflight(tmp_path, alice_id).take(third.id) == third


def test_keeping_keeps_its_copy_once_however_often_it_is_called(tmp_path: Path, alice_id: Identity) -> None:
    """A send calls it while the relay stores the message and again before it returns."""
    inner, made = message(alice_id, "kept once"), []

    def plaintext() -> bytes:
        made.append(1)
        return plaintext_of(inner)

    keeping = Keeping(Inflight(tmp_path, alice_id), inner, plaintext)
    keeping()
    keeping()
    assert made == [1] and len(read_records(tmp_path / INFLIGHT_FILE)) == 1
    assert Inflight(tmp_path, alice_id).take(inner.id) == inner


def test_a_copy_that_cannot_be_written_is_not_kept_and_the_send_goes_on(tmp_path: Path,
                                                                         alice_id: Identity) -> None:
    """The message has left by then: a disk that refuses the copy must not make the send read as
    failed (the outbox's synced appends report such a disk)."""
    (tmp_path / INFLIGHT_FILE).mkdir()  # any write to the log fails
    inner = message(alice_id, "not kept")
    Keeping(Inflight(tmp_path, alice_id), inner, lambda: plaintext_of(inner))()
    (tmp_path / INFLIGHT_FILE).rmdir()  # nothing was written into it
    assert Inflight(tmp_path, alice_id).take(inner.id) is None
