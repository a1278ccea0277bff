"""keys.ratchet_inflight: a ratchet message's inner envelope, sealed at rest, bounded, dropped."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

from keys.envelope import new_message
from keys.identity import Identity
from keys.ratchet_envelope import plaintext_of
from keys.ratchet_inflight import CHECK_ONE_IN, INFLIGHT_DIR, Inflight
from tests.unit.samples import secret_forms


def test_a_kept_message_comes_back_whole_and_is_sealed_at_rest(tmp_path: Path, alice_id: Identity,
                                                               bob_id: Identity) -> None:
    inner = new_message(alice_id.fingerprint, bob_id.fingerprint, "the whole text " * 40, seq=7)
    Inflight(tmp_path, alice_id).keep(inner, plaintext_of(inner))
    stored = (tmp_path / INFLIGHT_DIR / f"{inner.id}.bin").read_bytes()
    assert b"the whole text" not in stored
    assert not any(form in stored for form in secret_forms(alice_id))
    assert Inflight(tmp_path, alice_id).take(inner.id) == inner
    assert Inflight(tmp_path, bob_id).take(inner.id) is None  # another identity's key opens nothing


def test_drop_forgets_and_unknown_or_bad_ids_are_none(tmp_path: Path, alice_id: Identity) -> None:
    store = Inflight(tmp_path, alice_id)
    inner = new_message(alice_id.fingerprint, alice_id.fingerprint, "hi")
    store.keep(inner, plaintext_of(inner))
    store.drop([inner.id, "../../etc/passwd"])
    assert store.take(inner.id) is None and store.take("../x") is None


def test_the_budget_drops_the_oldest_first_and_skips_what_never_fits(tmp_path: Path,
                                                                     alice_id: Identity) -> None:
    first = new_message(alice_id.fingerprint, alice_id.fingerprint, "a" * 600)
    store = Inflight(tmp_path, alice_id, keep_bytes=1500)
    store.keep(first, plaintext_of(first))
    path = tmp_path / INFLIGHT_DIR / f"{first.id}.bin"
    os.utime(path, (1, 1))  # older than anything kept after it
    second = new_message(alice_id.fingerprint, alice_id.fingerprint, "b" * 600)
    store.keep(second, plaintext_of(second))
    assert store.take(first.id) is None and store.take(second.id) == second
    huge = new_message(alice_id.fingerprint, alice_id.fingerprint, "c" * 2000)
    store.keep(huge, plaintext_of(huge))
    assert store.take(huge.id) is None and store.take(second.id) == second


def test_a_burst_of_small_keeps_checks_the_budget_one_time_in_sixteen(tmp_path: Path,
                                                                      alice_id: Identity) -> None:
    """A burst of sends must not read the whole folder each time; the folder passes the budget
    by at most the small files kept since the last check."""
    store = Inflight(tmp_path, alice_id, keep_bytes=256 * 1024)
    kept = []
    for n in range(640):  # ids end in every hex digit in turn: every 16th checks
        inner = dataclasses.replace(new_message(alice_id.fingerprint, alice_id.fingerprint, "x" * 300),
                                    id=f"{n:032x}")
        store.keep(inner, plaintext_of(inner))
        kept.append(inner)
    sizes = [p.stat().st_size for p in (tmp_path / INFLIGHT_DIR).glob("*.bin")]
    assert store.keep_bytes < sum(sizes) <= store.keep_bytes + (CHECK_ONE_IN - 1) * max(sizes)
    assert store.take(kept[0].id) is None and store.take(kept[-1].id) == kept[-1]  # the oldest went
